"""The `@tool` decorator: a plain async function becomes a `Tool` the model can be told about.

The name comes from the function, the description from its docstring, the JSON schema from its
signature through pydantic (never written by hand), each parameter's description from the
docstring's parameter section. Such tools reach the registry through `tools/function_source.py`;
calling them (allowed subsets, deadlines, masking, results that never crash the turn) is
`tools/registry.py`.
"""

from __future__ import annotations

import dataclasses
import inspect
import keyword
import re
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, overload

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, create_model

from tools.base import ToolContext, ToolSpec
from tools.source import ToolAnnotations, ToolInfo
from tools.status import status_from

ToolFn = Callable[..., Awaitable[Any]]

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
    # A read-only or idempotent tool is safe to run again with the same arguments: a turn
    # resumed after a crash re-runs such a call that had started but left no result; any other
    # call in that state makes the turn unresumable (bot/pipeline/resume.py).
    annotations: ToolAnnotations = ToolAnnotations()
    approval: bool = False  # a person allows each call first (tools/approval.py)

    @property
    def status_text(self) -> str:
        """What a channel shows while this tool runs, e.g. "Getting the current date and time"."""
        return self.status if self.status is not None else status_from(self.description)

    @property
    def info(self) -> ToolInfo:
        """The tool as a source lists it."""
        return ToolInfo(
            self.spec,
            self.annotations,
            self.status_text,
            self.timeout_s,
            self.max_result_chars,
            self.mask_pii,
            self.approval,
        )

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
    read_only: bool = False,
    destructive: bool | None = None,
    open_world: bool = True,
    approval: bool = False,
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
    read_only: bool = False,
    destructive: bool | None = None,
    open_world: bool = True,
    approval: bool = False,
) -> Tool | Callable[[ToolFn], Tool]:
    """Turn an async function `(ctx, ...)` into a `Tool`; usable as `@tool` and `@tool(...)`.

    `mask_pii=False` lets the tool's output reach the model unmasked (see `tools.pii`); a
    parameter named after a Python keyword plus `_` (`from_`) is called `from` in the schema.
    `status` is the line users see while the tool runs ("Checking the time"); by default it is
    made from the docstring's first clause. The annotations are MCP's (`ToolAnnotations`):
    `read_only=True` for a tool that changes nothing; `idempotent=True` when running the call
    twice does no harm (a write that replaces itself) — a turn resumed after a crash may then run
    again a call of either kind whose result was never recorded; `destructive` (by default: not
    read-only) when it may delete or overwrite; `open_world=False` when it reaches nothing
    outside this gateway. `approval=True`: every call waits for a person's yes first (a
    payment, a deletion: see tools/approval.py).
    """
    annotations = ToolAnnotations(
        read_only=read_only,
        destructive=not read_only if destructive is None else destructive,
        idempotent=idempotent,
        open_world=open_world,
    )

    def make(f: ToolFn) -> Tool:
        tool = _build(f, name or f.__name__, timeout_s, max_result_chars)
        return dataclasses.replace(
            tool, mask_pii=mask_pii, status=status, annotations=annotations, approval=approval
        )

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
