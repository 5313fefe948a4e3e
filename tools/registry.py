"""`ToolRegistry`: every tool the process knows, called within a caller's allowed subset.

A call never crashes the turn: bad arguments, a `ToolError`, a timeout or any exception come
back as a failed result the model reads. Making a tool from a function (`@tool`) is
`tools/tool.py`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from tools.base import ToolContext, ToolError, ToolResult, ToolSpec
from tools.pii import DEFAULT_MASKER, PiiMasker
from tools.tool import Tool, tool

log = logging.getLogger(__name__)

# `tool` and `Tool` are imported from here by every tool module
__all__ = ["Tool", "ToolObserver", "ToolOutcome", "ToolRegistry", "tool"]

ToolOutcome = Literal["ok", "error", "timeout", "refused"]
# (tool name, or "unknown" for a name no tool has; outcome; seconds): for /metrics
ToolObserver = Callable[[str, ToolOutcome, float], None]


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return str(value)


def _to_result(value: Any) -> ToolResult:
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        return ToolResult(value)
    return ToolResult(json.dumps(value, ensure_ascii=False, default=_jsonable))


def _truncate(result: ToolResult, limit: int) -> ToolResult:
    extra = len(result.text) - limit
    if extra <= 0:
        return result
    text = f"{result.text[:limit]}\n…[truncated {extra} characters]"
    return dataclasses.replace(result, text=text)


def _validation_text(tool: Tool, exc: ValidationError) -> str:
    lines = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(part) for part in err["loc"])
        where = f"argument {loc!r}: " if loc else ""
        lines.append(f"{tool.name}: {where}{err['msg']}")
    props = list(tool.spec.parameters.get("properties", {}))
    required = list(tool.spec.parameters.get("required", []))
    optional = [p for p in props if p not in required]
    lines.append(f"required arguments: {required}; optional: {optional}")
    return "\n".join(lines)


class ToolRegistry:
    """Every tool the process knows; a call names the subset the caller may use."""

    def __init__(
        self, tools: Iterable[Tool] = (), *, pii: PiiMasker | None = DEFAULT_MASKER
    ) -> None:
        self.pii = pii  # masks every result of a tool with mask_pii; None switches masking off
        self.observer: ToolObserver | None = None  # told of every call's outcome and duration
        self._tools: dict[str, Tool] = {}
        self._specs: dict[tuple[str, ...], tuple[ToolSpec, ...]] = {}
        for t in tools:
            self.add(t)

    def add(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is already registered; rename one (@tool(name=))")
        self._tools[tool.name] = tool
        self._specs.clear()

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def names(self) -> list[str]:
        return list(self._tools)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def status(self, name: str) -> str:
        """The status line of tool `name`; empty for a name no tool has."""
        tool = self._tools.get(name)
        return tool.status_text if tool is not None else ""

    def specs(self, names: Iterable[str]) -> tuple[ToolSpec, ...]:
        """Specs of the known tools among `names`, in that order; built once per tuple of names."""
        key = tuple(names)
        specs = self._specs.get(key)
        if specs is None:
            specs = self._specs[key] = tuple(self._tools[n].spec for n in key if n in self._tools)
        return specs

    async def call(
        self,
        name: str,
        arguments: str | Mapping[str, Any],
        ctx: ToolContext,
        *,
        allowed: Collection[str],
        timeout_s: float,
        max_result_chars: int = 8000,
    ) -> ToolResult:
        """Run one tool call; every problem comes back as a failed result the model can read.

        The text is PII-masked (unless the tool opted out) before the result budget applies.
        """
        started = time.perf_counter()
        result, outcome = await self._call(
            name, arguments, ctx, allowed, timeout_s, max_result_chars
        )
        if self.observer is not None:
            label = name if name in self._tools else "unknown"  # hallucinated names: unbounded
            self.observer(label, outcome, time.perf_counter() - started)
        return result

    async def _call(
        self,
        name: str,
        arguments: str | Mapping[str, Any],
        ctx: ToolContext,
        allowed: Collection[str],
        timeout_s: float,
        max_result_chars: int,
    ) -> tuple[ToolResult, ToolOutcome]:
        tool = self._tools.get(name)
        if tool is None or name not in allowed:
            available = sorted(n for n in allowed if n in self._tools)
            if tool is None:
                return ToolResult(
                    f"unknown tool {name!r}; available tools: {available}", ok=False
                ), "refused"
            text = f"tool {name!r} is not available here; available tools: {available}"
            return ToolResult(text, ok=False), "refused"
        try:
            raw = json.loads(arguments.strip() or "{}") if isinstance(arguments, str) else arguments
            if not isinstance(raw, Mapping | None):
                raise ValueError(f"expected a JSON object, got {type(raw).__name__}")
        except ValueError as exc:
            text = f"invalid arguments for {name}: {exc}; send a JSON object matching the schema"
            return ToolResult(text, ok=False), "refused"
        try:
            validated = tool.params.model_validate(dict(raw or {}))
        except ValidationError as exc:
            return ToolResult(_validation_text(tool, exc), ok=False), "refused"
        result, outcome = await self._run(tool, validated, ctx, tool.timeout_s or timeout_s)
        if tool.mask_pii and self.pii is not None:
            result = dataclasses.replace(result, text=await self._mask(self.pii, result.text))
        return _truncate(result, tool.max_result_chars or max_result_chars), outcome

    @staticmethod
    async def _mask(pii: PiiMasker, text: str) -> str:
        # up to ~1 ms per KB of phone-dense text: a huge result (a fetched page, say) is masked
        # on a thread so it cannot stall the loop; it is masked whole, then cut to the budget
        if len(text) > 16384:
            return await asyncio.to_thread(pii.mask, text)
        return pii.mask(text)

    async def _run(
        self, tool: Tool, validated: BaseModel, ctx: ToolContext, deadline: float
    ) -> tuple[ToolResult, ToolOutcome]:
        scope = asyncio.timeout(deadline)
        try:
            async with scope:
                value = await tool.fn(ctx, **tool.bind(validated))
            result = _to_result(value)
            return result, "ok" if result.ok else "error"
        except ToolError as exc:
            return ToolResult(f"{tool.name}: {exc}", ok=False), "error"
        except Exception as exc:
            # a TimeoutError of the tool's own (say, a network deadline) is a failure, not ours
            if isinstance(exc, TimeoutError) and scope.expired():
                text = f"tool {tool.name} timed out after {deadline:g} s"
                return ToolResult(text, ok=False), "timeout"
            log.warning("tool %s failed", tool.name, exc_info=True)
            text = f"tool {tool.name} failed: {type(exc).__name__}: {exc}"
            return ToolResult(text, ok=False), "error"
