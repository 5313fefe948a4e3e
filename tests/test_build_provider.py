"""`build_provider`: which provider serves, from config and environment; a missing key is one line."""

import contextlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.providers import build_provider, describe_provider
from agent.providers.anthropic import AnthropicProvider
from agent.providers.base import Provider, ProviderConfigError, ProviderError
from agent.providers.offline import OfflineProvider
from agent.providers.openai import OpenAIProvider
from agent.providers.resilient import ResilientProvider
from agent.providers.textmode import ToolModeProvider
from agent.types import Message, ModelRequest
from bot.runtime.config import LLMConfig
from tests.fake_anthropic import FakeAnthropic
from tests.fake_llm import FakeLLM, Reply
from tests.fake_openai import FakeOpenAI

ROOT = Path(__file__).resolve().parent.parent


async def _build(env: dict[str, str], **llm: Any) -> ResilientProvider:
    """A provider for a vendor: always wrapped for retries and fallbacks."""
    provider = build_provider(LLMConfig(**llm), env=env)
    assert isinstance(provider, ResilientProvider), provider
    return provider


def _vendor(provider: ResilientProvider) -> Provider:
    inner = provider.chain[0]
    return inner.inner if isinstance(inner, ToolModeProvider) else inner


async def test_auto_without_keys_is_the_offline_model() -> None:
    assert isinstance(build_provider(LLMConfig(), env={}), OfflineProvider)


async def test_auto_prefers_anthropic_then_openai() -> None:
    provider = await _build({"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o"})
    assert isinstance(_vendor(provider), AnthropicProvider)
    assert describe_provider(provider) == "anthropic (claude-sonnet-5-5)"
    await provider.aclose()
    provider = await _build({"OPENAI_BASE_URL": "http://localhost:11434/v1"}, model="llama3.2")
    vendor = _vendor(provider)
    assert isinstance(vendor, OpenAIProvider) and vendor.base_url == "http://localhost:11434/v1"
    assert describe_provider(provider) == "openai (llama3.2)"  # no key needed for a local server
    await provider.aclose()


async def test_a_chain_is_described_whole_and_tool_mode_applies() -> None:
    fallback = [{"provider": "openai", "model": "gpt-x", "api_key": "o"}, {"provider": "offline"}]
    provider = await _build(
        {"ANTHROPIC_API_KEY": "a"}, fallback=fallback, tool_mode="native", max_retries=4
    )
    assert describe_provider(provider) == (
        "anthropic (claude-sonnet-5-5), falling back to openai (gpt-x), then offline (offline-rules)"
    )
    assert isinstance(provider.chain[0], AnthropicProvider)  # native: no wrapper
    assert provider.max_retries == 4
    await provider.aclose()


@pytest.mark.parametrize(
    ("llm", "expected"),
    [
        (
            {"provider": "anthropic"},
            "llm.provider is 'anthropic' but no API key is set: set ANTHROPIC_API_KEY",
        ),
        (
            {"provider": "openai"},
            "llm.provider is 'openai' but no API key is set: set OPENAI_API_KEY",
        ),
        (
            {"provider": "offline", "fallback": [{"provider": "anthropic"}]},
            "llm.fallback[0].provider is 'anthropic'",
        ),
    ],
)
async def test_a_missing_key_for_a_chosen_provider_is_a_clear_error(
    llm: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ProviderConfigError, match=expected.replace("[", r"\[").replace("]", r"\]")):
        await _build({}, **llm)


@pytest.mark.process
def test_bot_serve_without_the_key_exits_with_one_line(tmp_path: Path) -> None:
    config = {
        "llm": {"provider": "anthropic"},
        "storage": {"path": str(tmp_path / "bot.db")},
        "server": {"port": 0},
    }
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps(config))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "bot", "serve", "--config", str(path)],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith("error: llm.provider is 'anthropic' but no API key")
    )
    assert "Traceback" not in result.stderr


async def test_a_base_url_in_the_config_means_an_openai_compatible_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = await _build({"ANTHROPIC_API_KEY": "a"}, base_url="http://localhost:1234/v1")
    assert isinstance(_vendor(provider), OpenAIProvider)
    assert "llm.model is not set" in caplog.text
    await provider.aclose()


async def _key_sent(provider: ResilientProvider, fake: FakeLLM) -> str | None:
    """Ask `provider` once; the key `fake` received."""
    fake.add(Reply(text=["ok"]))
    with contextlib.suppress(ProviderError):  # a wrong key is a 401: the key is what we check
        async for _ in provider.stream(ModelRequest("", (Message("user", "hi"),))):
            pass
    await provider.aclose()
    return fake.requests[-1].api_key


async def test_auto_sends_the_key_of_the_variable_that_chose_the_vendor() -> None:
    # LLM_API_KEY (llm.api_key's default) holds an OpenAI key, but ANTHROPIC_API_KEY chose Anthropic
    async with FakeAnthropic(api_key="anthropic-key") as fake:
        env = {"ANTHROPIC_API_KEY": "anthropic-key", "ANTHROPIC_BASE_URL": fake.url,
               "OPENAI_API_KEY": "openai-key"}  # fmt: skip
        provider = await _build(env, api_key="openai-key", max_retries=0)
        assert await _key_sent(provider, fake) == "anthropic-key"
    async with FakeOpenAI(api_key="openai-key") as fake:
        env = {"OPENAI_API_KEY": "openai-key", "OPENAI_BASE_URL": fake.url}
        provider = await _build(env, api_key="llm-key", model="m", max_retries=0)
        assert await _key_sent(provider, fake) == "openai-key"


async def test_llm_api_key_serves_an_explicit_provider_or_a_keyless_auto() -> None:
    async with FakeAnthropic(api_key="config-key") as fake:
        env = {"ANTHROPIC_API_KEY": "env-key", "ANTHROPIC_BASE_URL": fake.url}
        provider = await _build(env, provider="anthropic", api_key="config-key", max_retries=0)
        assert await _key_sent(provider, fake) == "config-key"
    async with FakeOpenAI(api_key="llm-key") as fake:  # auto chose openai for OPENAI_BASE_URL
        provider = await _build(
            {"OPENAI_BASE_URL": fake.url}, api_key="llm-key", model="m", max_retries=0
        )
        assert await _key_sent(provider, fake) == "llm-key"
    async with FakeOpenAI(api_key="llm-key") as fake:  # ... or for llm.base_url: they go together
        env = {"ANTHROPIC_API_KEY": "anthropic-key", "OPENAI_API_KEY": "openai-key"}
        provider = await _build(env, base_url=fake.url, api_key="llm-key", model="m")
        assert await _key_sent(provider, fake) == "llm-key"
