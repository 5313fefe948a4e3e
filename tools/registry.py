"""`ToolRegistry`: every tool the process knows, from every source, called within a caller's
allowed subset.

The registry is a union of tool sources (tools/source.py): the Python functions added with
`add`, and any source added with `add_source` (the control tools, an MCP server). Whatever the
source, a call gets the same guarantees here: only the caller's allowed names run, a deadline,
PII masking, the result budget, the metrics observer; and it never crashes the turn: bad
arguments, a `ToolError`, a timeout or any exception come back as a failed result the model
reads. Making a tool from a function (`@tool`) is `tools/tool.py`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import fnmatch
import json
import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tools.base import ToolContext, ToolError, ToolResult, ToolSpec
from tools.function_source import FunctionSource
from tools.pii import DEFAULT_MASKER, PiiMasker
from tools.source import ArgumentsRefused, ToolInfo, ToolSource
from tools.status import status_from
from tools.tool import Tool, tool

log = logging.getLogger(__name__)

# `tool` and `Tool` are imported from here by every tool module
__all__ = ["Tool", "ToolObserver", "ToolOutcome", "ToolRegistry", "tool"]

ToolOutcome = Literal["ok", "error", "timeout", "refused"]
# (tool name, or "unknown" for a name no tool has; outcome; seconds): for /metrics
ToolObserver = Callable[[str, ToolOutcome, float], None]
_GLOB = frozenset("*?[")
MAX_TOOLS = 128  # OpenAI refuses a request offering more (`array_above_max_length`)


def is_pattern(name: str) -> bool:
    """Whether a persona's tool entry is a glob (`mcp__files__*`) rather than one name."""
    return not _GLOB.isdisjoint(name)


def _truncate(result: ToolResult, limit: int) -> ToolResult:
    extra = len(result.text) - limit
    if extra <= 0:
        return result
    text = f"{result.text[:limit]}\n…[truncated {extra} characters]"
    return dataclasses.replace(result, text=text)


@dataclass(frozen=True, slots=True)
class _Entry:
    source: ToolSource
    info: ToolInfo
    status: str


class ToolRegistry:
    """Every tool the process knows; a call names the subset the caller may use."""

    def __init__(
        self,
        tools: Iterable[Tool] = (),
        *,
        sources: Iterable[ToolSource] = (),
        pii: PiiMasker | None = DEFAULT_MASKER,
    ) -> None:
        self.pii = pii  # masks every result of a tool with mask_pii; None switches masking off
        self.observer: ToolObserver | None = None  # told of every call's outcome and duration
        self._functions = FunctionSource(name="builtin")
        self._sources: list[ToolSource] = [self._functions]
        self._built_at: tuple[int, ...] = ()  # the sources' versions the index was built at
        self._index: dict[str, _Entry] = {}
        self._specs: dict[tuple[str, ...], tuple[ToolSpec, ...]] = {}
        self._resolved: dict[tuple[str, ...], tuple[str, ...]] = {}
        for t in tools:
            self.add(t)
        for source in sources:
            self.add_source(source)

    def add(self, tool: Tool) -> None:
        """One more Python function tool; its name must be new."""
        if tool.name in self._current():
            raise ValueError(f"tool {tool.name!r} is already registered; rename one (@tool(name=))")
        self._functions.add(tool)

    def add_source(self, source: ToolSource) -> None:
        """One more source; a name an earlier source has stays the earlier source's."""
        self._sources.append(source)

    @property
    def version(self) -> tuple[int, ...]:
        """Changes whenever any source's list does: caches of specs keyed by it notice."""
        return (len(self._sources), *(source.version for source in self._sources))

    def _current(self) -> dict[str, _Entry]:
        version = self.version
        if version != self._built_at:
            self._rebuild(version)
        return self._index

    def _rebuild(self, version: tuple[int, ...]) -> None:
        index: dict[str, _Entry] = {}
        for source in self._sources:
            for info in source.tools():
                held = index.get(info.name)
                if held is not None:
                    log.warning(
                        "tool %r of source %s is hidden: source %s has a tool of that name",
                        info.name,
                        source.name,
                        held.source.name,
                    )
                    continue
                status = info.status or status_from(info.spec.description)
                index[info.name] = _Entry(source, info, status)
        self._index, self._built_at = index, version
        self._specs.clear()
        self._resolved.clear()

    def __contains__(self, name: object) -> bool:
        return name in self._current()

    def names(self) -> list[str]:
        return list(self._current())

    def get(self, name: str) -> Tool | None:
        """The Python function tool of that name (added with `add`), if any."""
        return self._functions.get(name)

    def info(self, name: str) -> ToolInfo | None:
        """Tool `name` as its source lists it, whatever the source."""
        entry = self._current().get(name)
        return entry.info if entry is not None else None

    def status(self, name: str) -> str:
        """The status line of tool `name`; empty for a name no tool has."""
        entry = self._current().get(name)
        return entry.status if entry is not None else ""

    def specs(self, names: Iterable[str]) -> tuple[ToolSpec, ...]:
        """Specs of the known tools among `names`, in that order; built once per tuple of names
        (and again after a source's list changed)."""
        index = self._current()
        key = tuple(names)
        specs = self._specs.get(key)
        if specs is None:
            specs = self._specs[key] = tuple(index[n].info.spec for n in key if n in index)
        return specs

    def resolve(self, entries: Iterable[str]) -> tuple[str, ...]:
        """A persona's `tools:` list as names: each glob (`mcp__files__*`) becomes the known
        names it matches, in registry order; a plain name stays, known or not."""
        index = self._current()
        key = tuple(entries)
        names = self._resolved.get(key)
        if names is None:
            found: dict[str, None] = {}
            for entry in key:
                if is_pattern(entry):
                    found.update((n, None) for n in index if fnmatch.fnmatchcase(n, entry))
                else:
                    found[entry] = None
            names = tuple(found)
            if len(names) > MAX_TOOLS:
                # a pattern grew past the limit after the persona loaded (an MCP server came up
                # with more tools): the first ones serve, rather than every request failing
                log.error(
                    "tools %s match %d tools, more than the %d a model API takes; offering the"
                    " first %d: narrow the patterns or the server's include/exclude",
                    list(key),
                    len(names),
                    MAX_TOOLS,
                    MAX_TOOLS,
                )
                names = names[:MAX_TOOLS]
            self._resolved[key] = names
        return names

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
        entry = self._current().get(name)
        result, outcome = await self._call(
            entry, name, arguments, ctx, allowed, timeout_s, max_result_chars
        )
        if self.observer is not None:
            label = name if entry is not None else "unknown"  # hallucinated names: unbounded
            self.observer(label, outcome, time.perf_counter() - started)
        return result

    async def _call(
        self,
        entry: _Entry | None,
        name: str,
        arguments: str | Mapping[str, Any],
        ctx: ToolContext,
        allowed: Collection[str],
        timeout_s: float,
        max_result_chars: int,
    ) -> tuple[ToolResult, ToolOutcome]:
        if entry is None or name not in allowed:
            index = self._current()
            available = sorted(n for n in allowed if n in index)
            if entry is None:
                text = f"unknown tool {name!r}; available tools: {available}"
                return ToolResult(text, ok=False), "refused"
            text = f"tool {name!r} is not available here; available tools: {available}"
            return ToolResult(text, ok=False), "refused"
        try:
            raw = json.loads(arguments.strip() or "{}") if isinstance(arguments, str) else arguments
            if not isinstance(raw, Mapping | None):
                raise ValueError(f"expected a JSON object, got {type(raw).__name__}")
        except ValueError as exc:
            text = f"invalid arguments for {name}: {exc}; send a JSON object matching the schema"
            return ToolResult(text, ok=False), "refused"
        info = entry.info
        result, outcome = await self._run(entry, raw or {}, ctx, info.timeout_s or timeout_s)
        if info.mask_pii and self.pii is not None:
            result = dataclasses.replace(result, text=await self._mask(self.pii, result.text))
        return _truncate(result, info.max_result_chars or max_result_chars), outcome

    @staticmethod
    async def _mask(pii: PiiMasker, text: str) -> str:
        # up to ~1 ms per KB of phone-dense text: a huge result (a fetched page, say) is masked
        # on a thread so it cannot stall the loop; it is masked whole, then cut to the budget
        if len(text) > 16384:
            return await asyncio.to_thread(pii.mask, text)
        return pii.mask(text)

    @staticmethod
    async def _run(
        entry: _Entry, arguments: Mapping[str, Any], ctx: ToolContext, deadline: float
    ) -> tuple[ToolResult, ToolOutcome]:
        name = entry.info.name
        scope = asyncio.timeout(deadline)
        try:
            async with scope:
                result = await entry.source.call(name, arguments, ctx)
            return result, "ok" if result.ok else "error"
        except ArgumentsRefused as exc:
            return ToolResult(str(exc), ok=False), "refused"
        except ToolError as exc:
            return ToolResult(f"{name}: {exc}", ok=False), "error"
        except Exception as exc:
            # a TimeoutError of the tool's own (say, a network deadline) is a failure, not ours
            if isinstance(exc, TimeoutError) and scope.expired():
                text = f"tool {name} timed out after {deadline:g} s"
                return ToolResult(text, ok=False), "timeout"
            log.warning("tool %s failed", name, exc_info=True)
            text = f"tool {name} failed: {type(exc).__name__}: {exc}"
            return ToolResult(text, ok=False), "error"
