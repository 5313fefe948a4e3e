"""A second tool source for the registry's contract test, and a blob store in memory.

`ListedSource` is a real implementation of the `ToolSource` seam that is not made of Python
signatures: its tools are a static list of specs (JSON schemas written out, as an MCP server
sends them), each with a handler; its list can be swapped while it runs, as a server's can.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tools.base import ToolContext, ToolResult, ToolSpec
from tools.source import ArgumentsRefused, ToolAnnotations, ToolInfo

Handler = Callable[[Mapping[str, Any], ToolContext], Awaitable[ToolResult]]


@dataclass(frozen=True, slots=True)
class Listed:
    info: ToolInfo
    handler: Handler


def listed(
    name: str,
    handler: Handler,
    *,
    properties: Mapping[str, Any] | None = None,
    required: Sequence[str] = (),
    annotations: ToolAnnotations | None = None,
    timeout_s: float | None = None,
    max_result_chars: int | None = None,
    mask_pii: bool = True,
) -> Listed:
    schema = {"type": "object", "properties": dict(properties or {}), "required": list(required)}
    spec = ToolSpec(name, f"The {name} tool.", schema)
    made = annotations or ToolAnnotations()
    info = ToolInfo(spec, made, "", timeout_s, max_result_chars, mask_pii)
    return Listed(info, handler)


class ListedSource:
    """Tools from a list of specs; arguments checked against each schema's keys."""

    def __init__(self, name: str, tools: Sequence[Listed]) -> None:
        self._name = name
        self._version = 0
        self._tools: dict[str, Listed] = {}
        self.replace(tools)

    @property
    def name(self) -> str:
        return self._name

    @property
    def version(self) -> int:
        return self._version

    def replace(self, tools: Sequence[Listed]) -> None:
        """A new list, as a server's `list_changed` brings one."""
        self._tools = {t.info.name: t for t in tools}
        self._version += 1

    def tools(self) -> Sequence[ToolInfo]:
        return [t.info for t in self._tools.values()]

    async def call(self, name: str, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        listed = self._tools[name]
        schema = listed.info.spec.parameters
        problems = [
            f"argument {k!r}: unexpected" for k in arguments if k not in schema["properties"]
        ]
        problems += [f"argument {k!r}: required" for k in schema["required"] if k not in arguments]
        if problems:
            raise ArgumentsRefused("\n".join(f"{name}: {p}" for p in problems))
        return await listed.handler(arguments, ctx)
