"""LLM providers: one module per vendor, the Provider protocol in base.py, and the choice of one.

`build_provider(llm)` turns the `llm` config section into the provider the app uses: the chosen
vendor (`provider: auto` as DESIGN §3.2 says), its fallbacks, each in `llm.tool_mode`, all behind
one `ResilientProvider` that retries and fails over. The SDKs are imported only when used.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from agent.providers.base import Provider, ProviderConfigError
from agent.providers.offline import OfflineProvider
from tools.redact import redact_credentials

log = logging.getLogger(__name__)

# local servers ignore the key, but the OpenAI SDK refuses to start without one
NO_KEY_NEEDED = "not-needed"
KEY_VARIABLES = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}


def choose_provider_name(provider: str, env: Mapping[str, str], base_url: str | None = None) -> str:
    """`auto` → anthropic with ANTHROPIC_API_KEY, openai with OPENAI_API_KEY/OPENAI_BASE_URL (or a
    `llm.base_url`: that is always an OpenAI-compatible server), else offline."""
    if provider != "auto":
        return provider
    if env.get("ANTHROPIC_API_KEY") and not base_url:
        return "anthropic"
    if env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL") or base_url:
        return "openai"
    return "offline"


def build_provider(llm: Any, env: Mapping[str, str] | None = None) -> Provider:
    """The provider the `llm` config section asks for; ProviderConfigError if it cannot be built."""
    env = os.environ if env is None else env
    name = choose_provider_name(llm.provider, env, llm.base_url)
    if name == "offline" and llm.provider == "auto":
        log.info("no LLM key found (ANTHROPIC_API_KEY, OPENAI_API_KEY, OPENAI_BASE_URL):"
                 " using the offline demo model, which is not an LLM")  # fmt: skip
    chain = [_one(*entry, llm=llm, env=env) for entry in _entries(llm, env)]
    if len(chain) == 1 and chain[0].name == "offline":
        return chain[0]
    return _resilient(chain, llm)


def build_choices(llm: Any, env: Mapping[str, str] | None = None) -> dict[str, Provider]:
    """Each of `llm.choices` (the models a conversation may switch to) by name: the chosen
    model first, then the default chain (`llm`, `llm.fallback`) as its backups, so a chosen
    model that is down is answered for, and the answer says so."""
    env = os.environ if env is None else env
    built: dict[str, Provider] = {}
    for i, choice in enumerate(getattr(llm, "choices", ())):
        entry = (choice.provider, choice.model, choice.base_url, choice.api_key)
        first = _one(*entry, f"llm.choices[{i}]", None, llm=llm, env=env)
        backups = [_one(*e, llm=llm, env=env) for e in _entries(llm, env)]
        built[choice.name] = _resilient([first, *backups], llm)
    return built


def _entries(llm: Any, env: Mapping[str, str]) -> list[tuple[Any, ...]]:
    """The default chain's providers as `_one`'s arguments: `llm`, then each `llm.fallback`."""
    name = choose_provider_name(llm.provider, env, llm.base_url)
    entries = [(name, llm.model, llm.base_url, _auto_key(llm, name, env), "llm", llm.media)]
    entries += [
        (f.provider, f.model, f.base_url, f.api_key, f"llm.fallback[{i}]", f.media)
        for i, f in enumerate(llm.fallback)
    ]
    return entries


def _resilient(chain: list[Provider], llm: Any) -> Provider:
    from agent.providers.resilient import ResilientProvider

    return ResilientProvider(
        chain,
        max_retries=llm.max_retries,
        backoff_s=llm.retry_backoff_s,
        circuit_open_s=llm.circuit_open_s,
    )


def _auto_key(llm: Any, name: str, env: Mapping[str, str]) -> str:
    """The key for the chosen vendor. When `auto` chose it for its variable, that variable's key:
    `llm.api_key` (by default $LLM_API_KEY) may well belong to another vendor. A `llm.base_url`
    chose the server itself, so `llm.api_key` goes with it."""
    variable = KEY_VARIABLES.get(name, "")
    if llm.provider != "auto" or llm.base_url or not env.get(variable):
        return str(llm.api_key)
    if llm.api_key and llm.api_key != env[variable]:
        log.info("llm.provider is auto and %s is set: using it for %s, not llm.api_key;"
                 " set llm.provider to use llm.api_key", variable, name)  # fmt: skip
    return env[variable]


def describe_provider(provider: Provider) -> str:
    """Who serves, e.g. "anthropic (claude-…)"; with fallbacks, the whole chain."""
    return getattr(provider, "description", None) or f"{provider.name} ({provider.model})"


def _one(
    name: str,
    model: str | None,
    base_url: str | None,
    api_key: str,
    where: str,
    media_kinds: list[str] | None,
    *,
    llm: Any,
    env: Mapping[str, str],
) -> Provider:
    if name == "offline":
        return OfflineProvider()
    from agent.providers.deadline import Timeouts
    from agent.providers.door import internals_allowed
    from agent.providers.media import media_for
    from agent.providers.textmode import ToolModeProvider

    timeouts = Timeouts(llm.connect_timeout_s, llm.first_token_timeout_s, llm.total_timeout_s)
    internals = internals_allowed(env)  # BOT_SDK_INTERNALS=off: the SDKs' public API (door.py)
    vendor: Provider
    if name == "anthropic":
        key = api_key or env.get(KEY_VARIABLES[name], "")
        if not key:
            raise ProviderConfigError(
                f"{where}.provider is 'anthropic' but no API key is set: set ANTHROPIC_API_KEY"
                f" (or {where}.api_key, e.g. ${{LLM_API_KEY}})"
            )
        from agent.providers.anthropic import DEFAULT_MODEL, AnthropicProvider  # ~1 s to import

        base_url = base_url or env.get("ANTHROPIC_BASE_URL") or None
        vendor = AnthropicProvider(
            api_key=key,
            model=model or DEFAULT_MODEL,
            base_url=base_url,
            timeouts=timeouts,
            media=media_for(name, base_url, media_kinds, llm.media_history_images),
            sdk_internals=internals,
        )
    elif name == "openai":
        base_url = base_url or env.get("OPENAI_BASE_URL") or None
        key = api_key or env.get(KEY_VARIABLES[name], "")
        if not key and base_url is None:
            raise ProviderConfigError(
                f"{where}.provider is 'openai' but no API key is set: set OPENAI_API_KEY"
                f" (or {where}.api_key), or OPENAI_BASE_URL / {where}.base_url for a compatible"
                " server such as Ollama"
            )
        from agent.providers.openai import DEFAULT_MODEL as OPENAI_MODEL
        from agent.providers.openai import OPENAI_HOST, OpenAIProvider

        if not model and base_url and OPENAI_HOST not in base_url:
            log.warning(
                "%s.model is not set: asking %s for %r, which it may not have;"
                " set %s.model to one of its models",
                where, redact_credentials(base_url), OPENAI_MODEL, where,
            )  # fmt: skip
        vendor = OpenAIProvider(
            api_key=key or NO_KEY_NEEDED,
            model=model or OPENAI_MODEL,
            base_url=base_url,
            timeouts=timeouts,
            media=media_for(name, base_url, media_kinds, llm.media_history_images),
            sdk_internals=internals,
        )
    else:
        raise ProviderConfigError(
            f"{where}.provider: unknown provider {name!r}; use anthropic, openai or offline"
        )
    return vendor if llm.tool_mode == "native" else ToolModeProvider(vendor, llm.tool_mode)
