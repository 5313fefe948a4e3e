"""Redis going away under an app that was up: the web socket's `message` and the sessions API's
POST answer "later" (`try_later`, 503 with Retry-After), keep nothing, and a resend once Redis is
back is answered once, as a first. The app's Redis is reached through a proxy the test cuts (an
RST on every connection, then nothing listening), the real Redis stays up for the other tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from agent.providers.scripted import Reply, ScriptedProvider
from bot.runtime.app import App
from tests.api_kit import KEY_A, ApiClient, api_section
from tests.conftest import WsClient, connect, make_config
from tests.redis_kit import URL, prefix
from tests.tcp_proxy import TcpProxy

__all__ = ["prefix"]


async def _started(tmp_path: Path, prefix: str, proxy: TcpProxy, **sections: Any) -> App:
    await proxy.listen()
    url = f"redis://127.0.0.1:{proxy.port}{urlsplit(URL).path or '/0'}"
    config = make_config(tmp_path, redis={"url": url, "prefix": prefix}, **sections)
    app = App(config, base_dir=tmp_path, provider=ScriptedProvider([Reply("the answer")]))
    await app.__aenter__()
    return app


def _upstream() -> tuple[str, int]:
    parts = urlsplit(URL)
    return parts.hostname or "127.0.0.1", parts.port or 6379


async def _until_taken(client: WsClient, cmid: str) -> dict[str, Any]:
    """Send `cmid` until it is not refused for later (the app's Redis pool reconnecting)."""
    while True:
        await client.send(type="message", text="hello", client_message_id=cmid)
        frame = await client.until(lambda f: f["type"] in ("message.user", "error"))
        if frame["type"] != "error":
            return frame
        assert frame["code"] == "try_later", frame


async def test_a_message_while_redis_is_down_is_refused_for_later_and_keeps_nothing(
    tmp_path: Path, prefix: str, session: aiohttp.ClientSession
) -> None:
    proxy = TcpProxy(_upstream())
    app = await _started(tmp_path, prefix, proxy)
    try:
        client = await connect(session, app)
        await client.hello()
        await proxy.cut()
        await client.send(type="message", text="hello", client_message_id="c1")
        error = await client.until(lambda f: f["type"] in ("error", "message.user"), 30)
        assert (error["type"], error.get("code")) == ("error", "try_later"), error
        assert error["retry_after_ms"] > 0
        await proxy.listen()  # Redis is back
        taken = await _until_taken(client, "c1")
        assert "duplicate" not in taken and taken["text"] == "hello"  # a first, not a resend
        answer = await client.until_type("message.completed", 30)
        assert answer["text"] == "the answer"
        await app.gateway.wait_idle()
        kinds = [f["type"] for f in client.frames]
        assert kinds.count("message.user") == 1 and kinds.count("message.completed") == 1
    finally:
        await app.stop()
        await proxy.cut()


async def test_the_sessions_api_answers_503_with_retry_after_while_redis_is_down(
    tmp_path: Path, prefix: str, session: aiohttp.ClientSession
) -> None:
    proxy = TcpProxy(_upstream())
    app = await _started(tmp_path, prefix, proxy, channels=api_section())
    try:
        api = ApiClient(session, app, KEY_A)
        session_id = await api.new_session()
        await proxy.cut()
        refused = await api.ask(session_id, "hello", client_message_id="c1")
        assert refused.status == 503, refused
        assert int(refused.headers["Retry-After"]) > 0
        assert refused.events[0].data["error"]["code"] == "try_later"
        status, body = await api.call("POST", f"/sessions/{session_id}/stop")
        assert status == 503 and body["error"]["code"] == "try_later", body
        await proxy.listen()
        while (stream := await api.ask(session_id, "hello", client_message_id="c1")).status == 503:
            pass  # the pool reconnecting
        assert stream.status == 200 and stream.last("message.completed")["text"] == "the answer"
        status, document = await api.call("GET", "/openapi.json")
        for path in ("messages", "stop", "actions"):
            assert (
                "503" in document["paths"][f"/sessions/{{session_id}}/{path}"]["post"]["responses"]
            ), path
        assert "Retry-After" in document["components"]["responses"]["E503"]["headers"]
    finally:
        await app.stop()
        await proxy.cut()
