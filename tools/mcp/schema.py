"""A server's input schemas made acceptable to every backend the gateway speaks to.

OpenAI-compatible endpoints (Gemini's among them) refuse `$ref`/`$defs`, `type` lists such as
`["string", "null"]` and nullable `anyOf`; a server written with pydantic emits all three. So:
references are inlined (a recursive one becomes an open object), `null` is dropped from type
lists and from `anyOf`/`oneOf` (an optional argument is simply left out), a one-item `allOf` is
merged, and the top level is always an object with `properties`. Descriptions are cut to 1024
characters, the most some endpoints take.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MAX_DESCRIPTION = 1024
_DROPPED = frozenset({"$schema", "$id", "$comment", "$defs", "definitions"})
_NULL = {"type": "null"}


def cut_description(text: str | None) -> str:
    text = " ".join((text or "").split()) if text and len(text) > MAX_DESCRIPTION else text or ""
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 1] + "…"


def normalise(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """The input schema as every backend takes it; never raises on a strange schema."""
    root = dict(schema or {})
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        found = root.get(key)
        if isinstance(found, Mapping):
            defs.update({f"#/{key}/{name}": value for name, value in found.items()})
    out = _node(root, defs, ())
    if not isinstance(out, dict):
        out = {}
    out["type"] = "object"
    if not isinstance(out.get("properties"), dict):
        out["properties"] = {}
    required = out.get("required")
    if not isinstance(required, list):
        out["required"] = []
    return out


def _node(node: Any, defs: Mapping[str, Any], seen: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_node(item, defs, seen) for item in node]
    if not isinstance(node, Mapping):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        rest = {k: v for k, v in node.items() if k != "$ref"}
        if ref in seen or ref not in defs:
            # recursive (or unresolvable): an open object the model fills as it can
            target: dict[str, Any] = {"type": "object"}
        else:
            target = _node(defs[ref], defs, (*seen, ref))
        return {**target, **_node(rest, defs, seen)}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key in ("properties", "patternProperties") and isinstance(value, Mapping):
            out[key] = {name: _node(sub, defs, seen) for name, sub in value.items()}
        elif key in ("default", "enum", "const", "examples"):
            out[key] = value
        else:
            out[key] = _node(value, defs, seen)
    return _simplify(out)


def _simplify(node: dict[str, Any]) -> dict[str, Any]:
    kind = node.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        if len(kinds) == 1:
            node["type"] = kinds[0]
        else:
            # several types: no single `type` is right; say it in words
            del node["type"]
            if kinds:
                note = f"(one of: {', '.join(map(str, kinds))})"
                node["description"] = f"{node.get('description', '')} {note}".strip()
    for key in ("anyOf", "oneOf"):
        options = node.get(key)
        if isinstance(options, list):
            options = [o for o in options if o != _NULL]
            if len(options) == 1 and isinstance(options[0], dict):
                del node[key]
                node = {**options[0], **node}
            elif options:
                node[key] = options
            else:
                del node[key]
    both = node.get("allOf")
    if isinstance(both, list) and len(both) == 1 and isinstance(both[0], dict):
        del node["allOf"]
        node = {**both[0], **node}
    if node.get("default", 0) is None:
        del node["default"]  # `default: null` of an optional argument: leaving it out says it
    return node
