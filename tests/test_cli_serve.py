"""`bot serve --host/--port` and BOT_HOST/BOT_PORT, through the real CLI: no config file needed."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import aiohttp
import pytest

from bot.runtime.config import ConfigError, load_config
from tests.conftest import WsClient
from tests.processes import serving

pytestmark = pytest.mark.process


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def _answers(session: aiohttp.ClientSession, port: int, origin: str) -> None:
    """The demo page loads and a web socket from `origin` gets an answer."""
    async with session.get(f"http://127.0.0.1:{port}/") as page:
        assert page.status == 200
        assert "widget.js" in await page.text()
    ws = await session.ws_connect(f"http://127.0.0.1:{port}/ws", headers={"Origin": origin})
    client = WsClient(ws)
    await client.hello()
    completed = await client.ask("hello")
    assert "not an LLM" in completed["text"]
    await ws.close()


async def test_port_0_serves_on_a_free_port_the_log_names(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    async with serving("--port", "0", cwd=tmp_path) as port:
        assert port not in (0, 8080)
        await _answers(session, port, f"http://127.0.0.1:{port}")


async def test_bot_port_moves_the_server_and_its_default_origins(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    # a config that spells out the default origins, as the reference config.yaml does
    origins = ["http://127.0.0.1:8080", "http://localhost:8080"]
    config = {"channels": {"websocket": {"allowed_origins": origins}}}
    (tmp_path / "config.yaml").write_text(json.dumps(config))
    free = _free_port()
    async with serving(cwd=tmp_path, env={"BOT_PORT": str(free)}) as port:
        assert port == free
        # localhost is another origin than the 127.0.0.1 the socket is reached at: admitted
        # only because the default origins followed the port
        await _answers(session, port, f"http://localhost:{port}")
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await session.ws_connect(
                f"http://127.0.0.1:{port}/ws", headers={"Origin": "http://localhost:8080"}
            )
        assert refused.value.status == 403


def test_flags_win_over_the_environment_which_wins_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("server: {host: 127.0.0.1, port: 9000}\n")
    assert load_config(path, env={}).server.port == 9000
    env = {"BOT_PORT": "9100", "BOT_HOST": "0.0.0.0"}
    assert load_config(path, env=env).server.port == 9100
    config = load_config(path, env=env, host="localhost", port=9200)
    assert (config.server.host, config.server.port) == ("localhost", 9200)
    assert config.channels.websocket.allowed_origins == [
        "http://127.0.0.1:9200",
        "http://localhost:9200",
    ]
    assert load_config(
        path, env={}, host="bot.example", port=80
    ).channels.websocket.allowed_origins == ["http://bot.example"]


def test_origins_a_user_set_do_not_move(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text('channels: {websocket: {allowed_origins: ["https://shop.example"]}}\n')
    config = load_config(path, env={"BOT_PORT": "9100"})
    assert config.channels.websocket.allowed_origins == ["https://shop.example"]
    # port 0 is chosen when binding: the defaults stay, and same-origin pages are admitted
    path.write_text("{}\n")
    assert load_config(path, env={}, port=0).channels.websocket.allowed_origins == [
        "http://127.0.0.1:8080",
        "http://localhost:8080",
    ]


def test_a_bad_bot_port_names_the_variable(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("{}\n")
    with pytest.raises(ConfigError, match=r"BOT_PORT: expected a port number 0\.\.65535.*'http'"):
        load_config(path, env={"BOT_PORT": "http"})
