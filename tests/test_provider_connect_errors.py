"""A model server that cannot be reached is reported as what happened (refused, TLS, a silent
server), from the vendor SDK's own exception, not all of it as "timed out". The real OpenAI and
Anthropic SDKs against loopback sockets."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator

import pytest

from agent.providers.anthropic import AnthropicProvider
from agent.providers.base import ProviderUnavailable
from agent.providers.deadline import Timeouts
from agent.providers.openai import OpenAIProvider
from agent.types import Message, ModelRequest
from tests.fake_http import closed_port_url
from tests.fake_openai import FakeOpenAI

Make = Callable[..., OpenAIProvider | AnthropicProvider]
PROVIDERS: list[Make] = [OpenAIProvider, AnthropicProvider]
REQUEST = ModelRequest(system="", messages=(Message(role="user", content="hi"),))
QUICK = Timeouts(connect_s=0.3, first_token_s=2, total_s=5)  # connect fires first


async def _failure(make: Make, base_url: str) -> str:
    provider = make(api_key="sk-test", base_url=base_url, timeouts=QUICK)
    try:
        with pytest.raises(ProviderUnavailable) as failed:
            async for _ in provider.stream(REQUEST):
                pass
    finally:
        await provider.aclose()
    return str(failed.value)


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections (the kernel's backlog) and never says a word."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield sock.getsockname()[1]


@pytest.mark.parametrize("make", PROVIDERS)
async def test_a_refused_connection_is_called_refused(make: Make) -> None:
    message = await _failure(make, closed_port_url() + "/v1")
    assert "connection refused" in message and "timed out" not in message


@pytest.mark.parametrize("make", PROVIDERS)
async def test_tls_to_a_plain_http_server_is_called_tls(make: Make) -> None:
    async with FakeOpenAI() as fake:
        message = await _failure(make, fake.url.replace("http://", "https://"))
    assert "TLS" in message and "timed out" not in message


@pytest.mark.parametrize("make", PROVIDERS)
async def test_a_silent_server_is_a_timeout_and_says_which(make: Make, silent_port: int) -> None:
    message = await _failure(make, f"http://127.0.0.1:{silent_port}/v1")
    assert "no answer within 2 s" in message and "no connection" not in message
    message = await _failure(make, f"https://127.0.0.1:{silent_port}/v1")  # no TLS handshake
    assert "timed out: no connection within 0.3 s" in message and "no data" not in message
