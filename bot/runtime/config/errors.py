"""ConfigError, and the one-line `dotted.key: what is expected, got X` made from pydantic errors."""

from __future__ import annotations

from collections.abc import Mapping
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

from pydantic.fields import FieldInfo

from bot.runtime.config.schema import Config, item_model
from tools.redact import redact_credentials


class ConfigError(Exception):
    """The config cannot be used. str() is one line: `source: dotted.key: what is expected`."""


_EXPECTED = {
    "bool_parsing": "true or false",
    "bool_type": "true or false",
    "string_type": "a string",
    "list_type": "a list",
    "model_type": "a mapping",
    "dict_type": "a mapping",
}


def describe(error: Mapping[str, Any]) -> str:
    """`dotted.key: what is expected, got X` for one pydantic error; a URL's password never
    shows (the value echoed may be a `user:password@` URL written under the wrong key)."""
    return redact_credentials(_describe(error))


def _describe(error: Mapping[str, Any]) -> str:
    loc = tuple(error["loc"])
    key = ".".join(str(part) for part in loc)
    if error["type"] == "extra_forbidden":
        parent = item_model(_resolve(loc[:-1])[1])
        known = ", ".join(sorted(parent.model_fields)) if parent else ""
        return f"{key}: unknown key; expected one of: {known}"
    field, resolved = _resolve(loc)
    annotation = _not_none(resolved)
    metadata = field.metadata if field is not None and resolved is field.annotation else []
    if get_origin(annotation) is Literal:
        expected = "one of " + ", ".join(repr(choice) for choice in get_args(annotation))
    elif annotation in (int, float):
        expected = _number(annotation, metadata)
    elif error["type"] == "value_error":
        extra = field.json_schema_extra if field is not None else None
        if isinstance(extra, dict) and extra.get("secret") and error["input"]:
            return f"{key}: {error['ctx']['error']}"  # never repeat a secret
        reason = str(error["ctx"]["error"])
        return f"{key}: {reason}{_got(reason, error['input'])}"
    else:
        msg = str(error["msg"])
        expected = _EXPECTED.get(error["type"], f"a valid value ({msg[:1].lower()}{msg[1:]})")
    if error["type"] == "missing":
        return f"{key}: required; expected {expected}"
    return f"{key}: expected {expected}{_got(expected, error['input'])}"


def _got(reason: str, value: object) -> str:
    """`, got X` after a reason; nothing where the reason already says the value is empty."""
    if value == "":
        said = any(word in reason for word in ("empty", "required", "missing"))
        return "" if said else ", got an empty value"
    return f", got {show(value)}"


def _resolve(loc: tuple[Any, ...]) -> tuple[FieldInfo | None, Any]:
    """The field named by `loc` and its annotation, unwrapped to the item type at a list index
    or a mapping's key (`mcp.servers.<name>`)."""
    field: FieldInfo | None = None
    annotation: Any = Config
    for part in loc:
        if get_origin(annotation) is list:
            annotation = get_args(annotation)[0]
            if isinstance(part, int):
                continue
        if get_origin(annotation) is dict:
            annotation = get_args(annotation)[1]
            continue
        model = item_model(annotation)
        if model is None or part not in model.model_fields:
            return None, None
        field = model.model_fields[part]
        annotation = field.annotation
    return field, annotation


def _not_none(annotation: Any) -> Any:
    """`X | None` -> X: null is allowed, so the error is about the other choice."""
    if get_origin(annotation) in (Union, UnionType):
        rest = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return annotation


def _number(kind: type, metadata: list[Any]) -> str:
    noun = "an integer" if kind is int else "a number"
    ops = ("ge", "gt", "le", "lt")
    bounds = {op: getattr(m, op) for m in metadata for op in ops if hasattr(m, op)}
    if "ge" in bounds and "le" in bounds:
        return f"{noun} between {bounds['ge']} and {bounds['le']}"
    signs = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}
    limits = " and ".join(f"{signs[op]} {bound}" for op, bound in bounds.items())
    return f"{noun} {limits}" if limits else noun


def show(value: Any) -> str:
    """A value as the user wrote it in YAML, short."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)
