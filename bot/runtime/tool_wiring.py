"""The tools the agent calls, as the config makes them: the registry (built-in unless one is
handed in) with PII masking, the control tools and every MCP server as one more source, and the
knowledge base and shared HTTP session the built-in tools read through. Opened, run and closed
by the app (bot/runtime/app.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from bot.runtime.config import Config
from tools.builtin import builtin_registry
from tools.control import CONTROL, control_source
from tools.knowledge import KnowledgeBase
from tools.mcp.servers import McpServers
from tools.registry import ToolRegistry
from tools.shared_http import SharedSession


class Tools(NamedTuple):
    registry: ToolRegistry
    knowledge: KnowledgeBase
    http: SharedSession  # for tools; opened with the app
    mcp: McpServers  # each server one more tool source, kept connected


def build_tools(
    config: Config, registry: ToolRegistry | None, base_dir: Path, path: Callable[[str], Path]
) -> Tools:
    """`path`: a configured path as the app reads it (relative to the config's folder)."""
    registry = registry or builtin_registry(config.tools.intake)
    registry.pii = config.tools.pii.masker()
    knowledge = KnowledgeBase(
        [path(d) for d in config.knowledge.dirs],
        passage_chars=config.knowledge.passage_chars,
        max_results=config.knowledge.max_results,
    )
    missing = [control for control in CONTROL if control.name not in registry]
    if missing:
        registry.add_source(control_source(missing))
    mcp = McpServers(config.mcp, base_dir=base_dir)
    for source in mcp.sources:
        registry.add_source(source)
    return Tools(registry, knowledge, SharedSession(), mcp)
