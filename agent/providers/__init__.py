"""LLM providers: one module per vendor, the Provider protocol in base.py, and the choice of one."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from agent.providers.base import Provider
from agent.providers.offline import OfflineProvider

log = logging.getLogger(__name__)


def choose_provider_name(provider: str, env: Mapping[str, str]) -> str:
    """`auto` → anthropic with ANTHROPIC_API_KEY, openai with OPENAI_API_KEY/OPENAI_BASE_URL, else offline."""
    if provider != "auto":
        return provider
    if env.get("ANTHROPIC_API_KEY"):
        return "anthropic"
    if env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL"):
        return "openai"
    return "offline"


def build_provider(llm: Any, env: Mapping[str, str] | None = None) -> Provider:
    """The provider `llm` (the `llm` config section) asks for."""
    name = choose_provider_name(llm.provider, os.environ if env is None else env)
    if name == "offline":
        if llm.provider == "auto":
            log.info("no LLM key found: using the offline demo model (not an LLM)")
        return OfflineProvider()
    # The Anthropic and OpenAI providers arrive with their own issue; until then, say so plainly.
    log.warning("provider %r is not available in this build yet; using the offline demo model", name)
    return OfflineProvider()
