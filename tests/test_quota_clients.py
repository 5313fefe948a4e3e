"""Quotas per client: a new web visitor id from the same address, or a new API session under the
same key, does not start the count again (`quotas.per_address`, `quotas.per_api_key`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp

from adapters.base import ChatRef, InboundMessage
from adapters.websocket import user_hash
from agent.providers.scripted import Reply, ScriptedProvider
from bot.pipeline.quota import MemoryQuotaState, Quotas
from bot.runtime.app import App
from bot.runtime.config.schema import QuotaLimits, QuotasConfig
from tests.api_kit import KEY_A, KEY_B, ApiClient, api_section
from tests.conftest import ORIGIN, WsClient, make_config

DAY_LIMIT = "today's limit (1 message a day)"


def _message(channel: str, user: str, client: str | None) -> InboundMessage:
    return InboundMessage(ChatRef(channel, user), user, "hi", f"e-{user}", client=client)


async def test_ids_of_one_client_share_its_limit_and_other_clients_have_their_own() -> None:
    config = QuotasConfig(
        per_address=QuotaLimits(turns_per_day=2), per_api_key=QuotaLimits(turns_per_day=1)
    )
    quotas = Quotas(config, MemoryQuotaState())
    here = "address:203.0.113.7"
    assert await quotas.admit(_message("websocket", "v:one", here)) is None
    assert await quotas.admit(_message("websocket", "v:two", here)) is None
    refused = await quotas.admit(_message("websocket", "v:three", here))
    assert refused is not None and "your network has reached today's limit" in refused
    assert await quotas.admit(_message("websocket", "v:four", "address:198.51.100.1")) is None
    assert await quotas.admit(_message("api", "a:s_1", "key:a")) is None
    by_key = await quotas.admit(_message("api", "a:s_2", "key:a"))
    assert by_key is not None and "this app has reached today's limit" in by_key
    assert await quotas.admit(_message("telegram", "42", None)) is None  # no client: no such limit
    assert await quotas.admit(_message("telegram", "43", None)) is None


@asynccontextmanager
async def _app(folder: Path, provider: ScriptedProvider, **sections: Any) -> AsyncIterator[App]:
    async with App(make_config(folder, **sections), base_dir=folder, provider=provider) as app:
        yield app


async def _ask(
    session: aiohttp.ClientSession,
    app: App,
    visitor: str,
    headers: dict[str, str] | None = None,
    **hello: Any,
) -> str:
    headers = {"Origin": ORIGIN, **(headers or {})}
    async with session.ws_connect(f"{app.url}/ws", headers=headers) as ws:
        client = WsClient(ws)
        await client.hello(visitor, **hello)
        return str((await client.ask("hello"))["text"])


async def test_a_new_visitor_id_from_the_same_address_is_still_over_the_limit(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("answered"), Reply("answered"), Reply("answered")])
    async with _app(
        tmp_path,
        provider,
        quotas={"per_address": {"turns_per_day": 1}},
        channels={"websocket": {"identity_secret": "s3cret"}},
    ) as app:
        assert await _ask(session, app, "visitor-0001") == "answered"
        assert DAY_LIMIT in await _ask(session, app, "visitor-0002")  # same address, new id
        signed = await _ask(
            session, app, "visitor-0003", user_id="42", user_hash=user_hash("s3cret", "42")
        )
        assert signed == "answered"  # a signed user is not a visitor: no address limit
    assert len(provider.requests) == 2


async def test_behind_a_proxy_the_address_comes_from_its_header(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("answered"), Reply("answered")])
    async with _app(
        tmp_path,
        provider,
        quotas={"per_address": {"turns_per_day": 1}},
        channels={"websocket": {"client_address_header": "X-Forwarded-For"}},
    ) as app:

        def via(address: str) -> dict[str, str]:
            return {"X-Forwarded-For": f"10.9.9.9, {address}"}  # the proxy's entry comes last

        assert await _ask(session, app, "visitor-0001", via("203.0.113.7")) == "answered"
        assert await _ask(session, app, "visitor-0002", via("198.51.100.1")) == "answered"
        assert DAY_LIMIT in await _ask(session, app, "visitor-0003", via("203.0.113.7"))


async def test_a_new_api_session_under_the_same_key_is_still_over_the_limit(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("answered"), Reply("answered")])
    quotas = {"per_api_key": {"turns_per_day": 1}}
    async with _app(tmp_path, provider, quotas=quotas, channels=api_section()) as app:

        async def ask(key: str) -> str:
            api = ApiClient(session, app, key)
            stream = await api.ask(await api.new_session(), "hello")
            return str(stream.last("message.completed")["text"])

        assert await ask(KEY_A) == "answered"
        assert "Sorry — this app has reached " + DAY_LIMIT in await ask(KEY_A)
        assert await ask(KEY_B) == "answered"  # another key, another client
