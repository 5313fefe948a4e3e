"""The `ToolSource` seam: where the registry's tools come from.

A source lists its tools (spec, annotations, limits) and runs one call; the registry
(tools/registry.py) adds what every call gets whatever its source: the caller's allowlist, the
deadline, PII masking, the result budget, the metrics observer. Sources: the Python functions
(`tools/function_source.py`: the built-ins, the control tools), and one per MCP server. A source
whose list changes while it runs (a server reconnected, `list_changed`) raises its `version`:
the registry, and every cache keyed by the registry's `version`, rebuild on the next look.

Errors a source's `call` may raise (the registry turns each into a result the model reads)::

    ToolError          the tool failed in a way the model can act on      -> "error"
     └── ArgumentsRefused  the arguments do not fit the tool's schema     -> "refused"
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tools.base import ToolContext, ToolError, ToolResult, ToolSpec


class ArgumentsRefused(ToolError):
    """The arguments do not fit the schema; the text names each problem and the fix."""


@dataclass(frozen=True, slots=True)
class ToolAnnotations:
    """What a tool says about its effects, named and defaulted as MCP's tool annotations are
    (hints from the tool's author, not guarantees): by default a tool may change anything,
    anywhere, and running it twice may do it twice."""

    read_only: bool = False  # changes nothing
    destructive: bool = True  # may delete or overwrite (meaningful when not read-only)
    idempotent: bool = False  # a second call with the same arguments changes nothing more
    open_world: bool = True  # reaches things outside this gateway (the web, a payment service)

    @property
    def repeatable(self) -> bool:
        """Safe to run again with the same arguments: a turn resumed after a crash may re-run
        such a call that had started but left no result (agent/replay.py)."""
        return self.read_only or self.idempotent


READ_ONLY = ToolAnnotations(read_only=True, destructive=False, idempotent=True, open_world=False)


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """One tool as its source lists it."""

    spec: ToolSpec
    annotations: ToolAnnotations = ToolAnnotations()
    status: str = ""  # the line users see while it runs; "" -> made from the description
    timeout_s: float | None = None  # None: the caller's deadline
    max_result_chars: int | None = None  # None: the caller's budget
    mask_pii: bool = True  # False: the tool's text reaches the model unmasked
    # A person says yes before each call runs (tools/approval.py): declared by the tool
    # (`@tool(approval=True)`), or an MCP tool its server marks destructive in so many words.
    approval: bool = False

    @property
    def name(self) -> str:
        return self.spec.name


class ToolSource(Protocol):
    """Lists tools and calls one; everything else a call needs is the registry's."""

    @property
    def name(self) -> str:
        """For logs and metrics, e.g. `builtin`, `control`, `mcp:files`."""
        ...

    @property
    def version(self) -> int:
        """Raised whenever `tools()` would answer differently."""
        ...

    def tools(self) -> Sequence[ToolInfo]:
        """The tools as they are now; cheap (a source that must ask a server keeps a copy)."""
        ...

    async def call(self, name: str, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        """Run tool `name` of this source; raise `ArgumentsRefused`, `ToolError` or anything
        else on failure. The registry's deadline cancels it."""
        ...
