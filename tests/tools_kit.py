"""Helpers for built-in tool tests: call a tool through the real registry with given settings."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from content.blobs import BlobStore
from tools.base import ToolContext, ToolDeps, ToolResult
from tools.builtin import builtin_registry
from tools.knowledge import KnowledgeBase
from tools.settings import ToolsSettings
from tools.shared_http import SharedSession

REGISTRY = builtin_registry()


def settings(**sections: Any) -> ToolsSettings:
    return ToolsSettings.model_validate(sections)


def context(
    *,
    user: str = "u1",
    storage: object = None,
    config: ToolsSettings | None = None,
    knowledge: KnowledgeBase | None = None,
    http: SharedSession | None = None,
    blobs: BlobStore | None = None,
) -> ToolContext:
    deps = ToolDeps(settings=config or ToolsSettings(), knowledge=knowledge, http=http, blobs=blobs)
    return ToolContext(user_id=user, session_id="s1", storage=storage, deps=deps)


async def call(
    name: str, args: dict[str, Any] | str, ctx: ToolContext, timeout_s: float = 5
) -> ToolResult:
    text = args if isinstance(args, str) else json.dumps(args)
    called = replace(ctx, tool_name=name, call_id=f"call-{name}")  # as the loop makes it
    return await REGISTRY.call(name, text, called, allowed=REGISTRY.names(), timeout_s=timeout_s)


async def call_json(name: str, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    result = await call(name, args, ctx)
    assert result.ok, result.text
    payload: dict[str, Any] = json.loads(result.text)
    return payload
