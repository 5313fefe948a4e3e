"""The `@tool` decorator and `ToolRegistry`: schemas from signatures, calls that never crash."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import keyword
import logging
import re
import time
import typing
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, overload

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from tools.base import ToolContext, ToolError, ToolResult, ToolSpec
from tools.pii import DEFAULT_MASKER, PiiMasker
from tools.status import status_from

log = logging.getLogger(__name__)

ToolFn = Callable[..., Awaitable[Any]]
ToolOutcome = Literal["ok", "error", "timeout", "refused"]
# (tool name, or "unknown" for a name no tool has; outcome; seconds): for /metrics
ToolObserver = Callable[[str, ToolOutcome, float], None]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what the Anthropic and OpenAI APIs accept
# the sections and reST fields that document a function's parameters (not "Attributes")
_PARAM_SECTIONS = frozenset(
    {"param", "parameter", "arg", "argument", "key", "keyword", "other_param"}
)
_SCHEMA_VALUES = frozenset({"default", "enum", "const", "examples"})  # data: keep any "title"


@dataclass(frozen=True, slots=True)
class Tool:
    """A plain async function plus what the model is told about it."""

    name: str
    description: str
    spec: ToolSpec
    params: type[BaseModel]
    fn: ToolFn
    timeout_s: float | None = None
    max_result_chars: int | None = None
    mask_pii: bool = True
    status: str | None = None  # declared by @tool(status=...); None: made from the description
    # Safe to run again with the same arguments (it reads, or its write replaces itself): a turn
    # resumed after a crash re-runs such a call that had started but left no result; any other
    # call in that state makes the turn unresumable (bot/resume.py).
    idempotent: bool = False

    @property
    def status_text(self) -> str:
        """What a channel shows while this tool runs, e.g. "Getting the current date and time"."""
        return self.status if self.status is not None else status_from(self.description)

    def bind(self, validated: BaseModel) -> dict[str, Any]:
        """The keyword arguments for `fn` from validated params."""
        fields = type(validated).model_fields
        return {_param_name(f, info.alias): getattr(validated, f) for f, info in fields.items()}

    async def __call__(self, ctx: ToolContext, **kwargs: Any) -> Any:
        return await self.fn(ctx, **self.bind(self.params.model_validate(kwargs)))


@overload
def tool(fn: ToolFn, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    timeout_s: float | None = None,
    max_result_chars: int | None = None,
    mask_pii: bool = True,
    status: str | None = None,
    idempotent: bool = False,
) -> Callable[[ToolFn], Tool]: ...


def tool(
    fn: ToolFn | None = None,
    *,
    name: str | None = None,
    timeout_s: float | None = None,
    max_result_chars: int | None = None,
    mask_pii: bool = True,
    status: str | None = None,
    idempotent: bool = False,
) -> Tool | Callable[[ToolFn], Tool]:
    """Turn an async function `(ctx, ...)` into a `Tool`; usable as `@tool` and `@tool(...)`.

    `mask_pii=False` lets the tool's output reach the model unmasked (see `tools.pii`); a
    parameter named after a Python keyword plus `_` (`from_`) is called `from` in the schema.
    `status` is the line users see while the tool runs ("Checking the time"); by default it is
    made from the docstring's first clause. `idempotent=True` declares that running the call
    twice does no harm (a read, or a write that replaces itself): a turn resumed after a crash
    may then run again a call whose result was never recorded.
    """

    def make(f: ToolFn) -> Tool:
        tool = _build(f, name or f.__name__, timeout_s, max_result_chars)
        return dataclasses.replace(tool, mask_pii=mask_pii, status=status, idempotent=idempotent)

    return make(fn) if fn is not None else make


def _param_name(field: str, alias: str | None) -> str:
    """The function's parameter name for a model field (see `_build` for the renames)."""
    if alias is None or field == f"{alias}_":
        return field
    return alias


def _build(fn: ToolFn, name: str, timeout_s: float | None, max_chars: int | None) -> Tool:
    where = f"tool {name!r} ({fn.__module__}.{fn.__qualname__})"
    if not _NAME.match(name):
        raise ValueError(f"{where}: name must match {_NAME.pattern}; pass @tool(name=...)")
    if not inspect.iscoroutinefunction(fn):
        raise TypeError(f"{where} must be an async function (async def)")
    doc = inspect.getdoc(fn)
    if not doc:
        raise TypeError(f"{where} has no docstring; its first paragraph is what the model reads")
    description, arg_docs = _parse_docstring(doc)
    params = list(inspect.signature(fn).parameters.values())
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if not params or params[0].kind not in positional:
        raise TypeError(f"{where}: the first parameter must be `ctx: ToolContext`")
    params = params[1:]
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except NameError as exc:
        fix = "import it at module level"
        raise TypeError(f"{where}: unresolvable annotation ({exc}); {fix}") from exc
    undocumented = set(arg_docs) - {p.name for p in params}
    if undocumented:
        raise ValueError(f"{where}: docstring Args {sorted(undocumented)} not in the signature")
    fields: dict[str, Any] = {}
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise TypeError(f"{where}: parameter {p.name!r} must be a plain named parameter")
        default = ... if p.default is p.empty else p.default
        field, alias = p.name, None
        if keyword.iskeyword(field.removesuffix("_")) and field.endswith("_"):
            alias = field.removesuffix("_")  # `from_` in Python is `from` for the model
        elif field.startswith("_") or hasattr(BaseModel, field):  # would shadow pydantic's names
            field, alias = f"arg_{field.lstrip('_')}", p.name
        info = Field(default, description=arg_docs.get(p.name), alias=alias)
        fields[field] = (hints.get(p.name, Any), info)
    config = ConfigDict(extra="forbid", protected_namespaces=())
    model = create_model(f"{name}_arguments", __config__=config, **fields)
    schema = _clean_schema(model.model_json_schema())
    spec = ToolSpec(name=name, description=description, parameters=schema)
    return Tool(name, description, spec, model, fn, timeout_s, max_chars)


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph, and each documented parameter (Google, reST or numpydoc style)."""
    parsed = docstring_parser.parse(doc)
    first_paragraph = (parsed.description or "").split("\n\n", 1)[0]
    args = {
        p.arg_name.lstrip("*"): " ".join((p.description or "").split())
        for p in parsed.params
        if p.args[0] in _PARAM_SECTIONS
    }
    return " ".join(first_paragraph.split()), args


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's generated titles; always give `properties` and `required`."""

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: v if k in _SCHEMA_VALUES else strip(v)
                for k, v in node.items()
                if not (k == "title" and isinstance(v, str))
            }
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    cleaned: dict[str, Any] = strip(schema)
    cleaned.setdefault("properties", {})
    cleaned.setdefault("required", [])
    return cleaned


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
