"""The text-mode tool-call format: the prompt that describes the tools, and the parser for replies.

A call is the JSON object `{"tool_calls": [{"name": ..., "arguments": {...}}]}`, optionally in a
code fence, optionally after some words. A bare `{"name": <a known tool>, "arguments": {...}}`
(what small models often write instead) is read too. A reply with no such object is an answer.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable
from typing import Any

from agent.types import ToolCall
from tools.base import ToolSpec

_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n?(.*?)\n?```$", re.DOTALL)
_DECODER = json.JSONDecoder()

PROMPT = """\
# Tools
You can call the tools below. To call one or more, reply with only this JSON object, nothing
before or after it:
{"tool_calls": [{"name": "<tool name>", "arguments": {<arguments as the tool's schema says>}}]}
The results come back in the next message. Then answer, or call more tools. When you need no
tool, answer in plain text, not JSON.

Available tools:
"""


class CallFormatError(ValueError):
    """The reply tried to be a tool call and is not a readable one; str() tells the model why."""


def tools_prompt(tools: Iterable[ToolSpec]) -> str:
    lines = [PROMPT]
    for spec in tools:
        schema = json.dumps(spec.parameters, ensure_ascii=False, separators=(",", ":"))
        lines.append(f"- {spec.name}: {spec.description}\n  arguments schema: {schema}")
    return "\n".join(lines)


def parse_calls(text: str, known: frozenset[str]) -> list[ToolCall] | None:
    """The calls in a reply; None for a plain answer; CallFormatError when it tried and failed."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    marker = body.find('"tool_calls"')
    if marker < 0:
        return _bare(body, known)
    data = _decode(body, marker)
    items = data.get("tool_calls")
    if isinstance(items, dict):
        items = [items]
    if not isinstance(items, list) or not items:
        raise CallFormatError(
            '"tool_calls" must be a non-empty list of {"name": ..., "arguments": {...}}'
        )
    return [_call(item, n) for n, item in enumerate(items, start=1)]


def _bare(body: str, known: frozenset[str]) -> list[ToolCall] | None:
    if not body.startswith(("{", "[")):
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    items = data if isinstance(data, list) else [data]
    named = [i for i in items if isinstance(i, dict) and i.get("name") in known]
    if not named or len(named) != len(items):
        return None  # JSON that is not a call: an answer that happens to be JSON
    return [_call(item, n) for n, item in enumerate(named, start=1)]


def _decode(body: str, marker: int) -> dict[str, Any]:
    """The JSON object around `"tool_calls"`: the whole body, else the nearest enclosing `{`."""
    try:
        data = json.loads(body)
        if isinstance(data, dict):
            return data
    except ValueError as exc:
        first = exc
    else:
        first = ValueError("expected a JSON object")
    start = body.rfind("{", 0, marker)
    while start >= 0:
        try:
            data, _ = _DECODER.raw_decode(body, start)
        except ValueError:
            pass
        else:
            if isinstance(data, dict) and "tool_calls" in data:
                return data
        start = body.rfind("{", 0, start)
    raise CallFormatError(f"not valid JSON ({first})")


def _call(item: Any, n: int) -> ToolCall:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
        raise CallFormatError(f'call #{n} needs a "name" string')
    args = item.get("arguments", item.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError as exc:
            raise CallFormatError(
                f'call #{n} ({item["name"]}): "arguments" is not valid JSON ({exc})'
            ) from None
    if not isinstance(args, dict):
        raise CallFormatError(f'call #{n} ({item["name"]}): "arguments" must be a JSON object')
    return ToolCall(
        f"call_{uuid.uuid4().hex[:12]}", item["name"], json.dumps(args, ensure_ascii=False)
    )
