"""An SDK release that changed an internal the fast path uses: the SDK's door finds out when the provider
is built, says so in the log, and the request goes through the SDK's public API, whole and with the
SDK's own errors (agent/providers/door.py)."""

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import openai
import pytest
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer

from agent.providers import anthropic_sdk, build_provider, openai_sdk
from agent.providers.door import INTERNALS_VARIABLE, PublicPost, internals_allowed
from agent.providers.prepared import PreparedPost
from agent.providers.wire import dumps
from bot.runtime.config import LLMConfig
from tests.fake_anthropic import FakeAnthropic
from tests.fake_llm import FakeLLM, Reply
from tests.fake_openai import FakeOpenAI


def _changed(base: type[Any]) -> type[Any]:
    """The SDK's client as a release whose `_build_request` wants what the SDK's own calls pass
    and ours does not: the SDK works, its internal as the fast path uses it does not."""

    def build(self: Any, options: Any, *, retries_taken: int) -> Any:
        return base._build_request(self, options, retries_taken=retries_taken)

    return type(f"Changed{base.__name__}", (base,), {"_build_request": build})


@pytest.fixture(params=["anthropic", "openai"])
async def fake(request: pytest.FixtureRequest) -> AsyncIterator[FakeLLM]:
    cls = FakeAnthropic if request.param == "anthropic" else FakeOpenAI
    async with cls() as server:
        yield server


def _door(fake: FakeLLM, client_cls: type[Any] | None = None) -> Any:
    sdk, door = (
        (anthropic, anthropic_sdk) if isinstance(fake, FakeAnthropic) else (openai, openai_sdk)
    )
    http = sdk.DefaultAioHttpClient()
    cls = client_cls or (sdk.AsyncAnthropic if sdk is anthropic else sdk.AsyncOpenAI)
    client = cls(api_key=fake.api_key, base_url=fake.url, http_client=http, max_retries=0)
    return client, door.door(client, http, internals=True)


def _body(fake: FakeLLM) -> bytes:
    request: dict[str, Any] = {"model": "m", "max_tokens": 9, "stream": True}
    if isinstance(fake, FakeAnthropic):
        request["messages"] = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    else:
        request["messages"] = [{"role": "user", "content": "hi"}]
    return dumps(request)


async def _text(door: Any, fake: FakeLLM) -> str:
    events = [event async for batch in await door.open(_body(fake)) for event in batch]
    text = [e["delta"].get("text") for e in events if e.get("type") == "content_block_delta"]
    text += [c["delta"].get("content") for e in events for c in e.get("choices") or ()]
    return "".join(t for t in text if t)


async def test_an_internal_changed_means_the_public_api(
    fake: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    base = anthropic.AsyncAnthropic if isinstance(fake, FakeAnthropic) else openai.AsyncOpenAI
    fake.add(Reply(text=["Hel", "lo"]), Reply(status=401, error="authentication_error"))
    with caplog.at_level(logging.INFO, logger="agent.providers.door"):
        client, door = _door(fake, _changed(base))
    assert isinstance(door, PublicPost)
    [said] = [r.getMessage() for r in caplog.records if "public API" in r.getMessage()]
    assert "internals changed" in said and "retries_taken" in said
    assert await _text(door, fake) == "Hello"
    with pytest.raises(anthropic.AuthenticationError if base is anthropic.AsyncAnthropic else
                       openai.AuthenticationError):  # fmt: skip
        await door.open(_body(fake))
    await client.close()
    [ours, again] = fake.requests
    assert ours.body == again.body and ours.headers["Authorization"] == f"Bearer {fake.api_key}"


async def test_with_its_internals_there_the_fast_path(fake: FakeLLM) -> None:
    fake.add(Reply(text=["ok"]))
    client, door = _door(fake)
    assert isinstance(door, PreparedPost)
    assert await _text(door, fake) == "ok"
    await client.close()


@pytest.mark.parametrize(
    ("value", "public"), [("off", True), ("OFF", True), ("0", True), ("on", False), ("", False)]
)
async def test_bot_sdk_internals_off_forces_the_public_api(value: str, public: bool) -> None:
    assert internals_allowed({INTERNALS_VARIABLE: value}) is not public
    llm = LLMConfig(provider="openai", base_url="http://127.0.0.1:9/v1", api_key="k", model="m")
    provider: Any = build_provider(llm, env={INTERNALS_VARIABLE: value})
    assert isinstance(provider.chain[0].inner._door, PublicPost if public else PreparedPost)
    await provider.aclose()


async def test_the_fast_path_follows_a_redirect_as_the_sdk_does(fake: FakeLLM) -> None:
    """The fast path sends on the client's transport, past the client: a redirect (a proxy in
    front of a model server that moved it) still goes through the client, which follows it as
    `post()` does, with the key (same origin) and the body."""
    fake.add(Reply(text=["moved ", "on"]))

    async def moved(request: web.Request) -> web.Response:
        return web.Response(status=307, headers={"Location": "/new" + request.path})

    async def forward(request: web.Request) -> web.StreamResponse:
        async with (
            ClientSession() as session,
            session.post(
                fake.url.removesuffix(fake.api_prefix) + request.path.removeprefix("/new"),
                data=await request.read(),
                headers={k: v for k, v in request.headers.items() if k.lower() != "host"},
            ) as answer,
        ):
            return web.Response(status=answer.status, body=await answer.read(),
                                content_type=answer.content_type)  # fmt: skip

    app = web.Application()
    app.router.add_post("/new/{tail:.*}", forward)
    app.router.add_post("/{tail:.*}", moved)
    async with TestServer(app, host="127.0.0.1") as proxy:
        sdk = anthropic if isinstance(fake, FakeAnthropic) else openai
        http = sdk.DefaultAioHttpClient()
        cls: Any = sdk.AsyncAnthropic if sdk is anthropic else sdk.AsyncOpenAI
        base_url = str(proxy.make_url("")).rstrip("/") + fake.api_prefix
        client = cls(api_key=fake.api_key, base_url=base_url, http_client=http, max_retries=0)
        door = (anthropic_sdk if sdk is anthropic else openai_sdk).door(
            client, http, internals=True
        )
        assert isinstance(door, PreparedPost)
        assert await _text(door, fake) == "moved on"
        await client.close()
    [received] = fake.requests
    assert received.body == json.loads(_body(fake))
