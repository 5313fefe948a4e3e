"""`FunctionSource`: plain async Python functions (`@tool`) as a tool source.

The built-in tools and the control tools are such sources. Arguments are validated against the
model pydantic made from the signature; what the function returns (text, a dict, a pydantic
model, a dataclass, a `ToolResult`) becomes a `ToolResult`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from tools.base import ToolContext, ToolResult
from tools.source import ArgumentsRefused, ToolInfo
from tools.tool import Tool


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return str(value)


def to_result(value: Any) -> ToolResult:
    """What a tool function returned, as the result the model reads."""
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        return ToolResult(value)
    return ToolResult(json.dumps(value, ensure_ascii=False, default=_jsonable))


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


class FunctionSource:
    """Tools made from Python functions; its list changes only when one is added."""

    def __init__(self, tools: Iterable[Tool] = (), *, name: str = "functions") -> None:
        self._name = name
        self._tools: dict[str, Tool] = {}
        self._infos: tuple[ToolInfo, ...] = ()
        self._version = 0
        for t in tools:
            self.add(t)

    @property
    def name(self) -> str:
        return self._name

    @property
    def version(self) -> int:
        return self._version

    def add(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is already registered; rename one (@tool(name=))")
        self._tools[tool.name] = tool
        self._infos = (*self._infos, tool.info)
        self._version += 1

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def tools(self) -> Sequence[ToolInfo]:
        return self._infos

    async def call(self, name: str, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        tool = self._tools[name]
        try:
            validated = tool.params.model_validate(dict(arguments))
        except ValidationError as exc:
            raise ArgumentsRefused(_validation_text(tool, exc)) from None
        return to_result(await tool.fn(ctx, **tool.bind(validated)))
