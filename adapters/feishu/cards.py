"""Card JSON 2.0 for answers: the streaming card, the final card with display hints as elements.

The answer is one markdown element (`ANSWER`), the element a stream updates. Display hints
(tools/display.py) become elements after it: a card's title and fields as markdown, an alert as
a coloured line, and buttons whose callback value carries what we need back: the action id and
value, the label, and where the conversation lives (its thread, group or not), so a press comes
back as an action on the same conversation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from adapters.feishu.render import plain_text, to_card_markdown

ANSWER = "answer"  # the element_id of the answer's markdown
_BUTTON_TYPES = {"primary": "primary_filled", "danger": "danger", "secondary": "default"}
_ALERTS = {"info": "ℹ️", "success": "✅", "warning": "⚠️", "error": "⛔"}
MAX_BUTTONS = 10


def card_json(
    markdown: str,
    *,
    streaming: bool,
    hints: Sequence[Mapping[str, Any]] = (),
    where: Mapping[str, Any] | None = None,
    summary: str | None = None,
) -> str:
    """The card as the JSON string CardKit and `msg_type: interactive` take."""
    config: dict[str, Any] = {"update_multi": True, "streaming_mode": streaming}
    config["summary"] = {"content": summary if summary is not None else plain_text(markdown, 60)}
    if streaming:
        config["streaming_config"] = {"print_frequency_ms": {"default": 30}}
    elements: list[dict[str, Any]] = [
        {"tag": "markdown", "element_id": ANSWER, "content": to_card_markdown(markdown) or " "}
    ]
    for index, hint in enumerate(hints):
        elements.extend(hint_elements(hint, index, where or {}))
    card = {"schema": "2.0", "config": config, "body": {"elements": elements}}
    return json.dumps(card, ensure_ascii=False)


def hint_elements(
    hint: Mapping[str, Any], index: int, where: Mapping[str, Any]
) -> list[dict[str, Any]]:
    kind = hint.get("type")
    lines: list[str] = []
    if kind == "card":
        lines.append(f"**{_text(hint.get('title', ''))}**")
        if hint.get("subtitle"):
            lines.append(_text(hint["subtitle"]))
        for field in hint.get("fields", []):
            lines.append(f"**{_text(field.get('label', ''))}**: {_text(field.get('value', ''))}")
    elif kind == "confirm":
        lines.append(_text(hint.get("text", "")))
    elif kind == "alert":
        icon = _ALERTS.get(str(hint.get("level")), "ℹ️")
        title = f"**{_text(hint['title'])}** " if hint.get("title") else ""
        lines.append(f"{icon} {title}{_text(hint.get('text', ''))}")
    else:
        return []
    elements: list[dict[str, Any]] = [
        {"tag": "hr"},
        {"tag": "markdown", "content": "\n".join(lines)},
    ]
    buttons = list(hint.get("buttons", []))[:MAX_BUTTONS]
    for number, spec in enumerate(buttons):
        elements.append(button(spec, f"h{index}b{number}", where))
    return elements


def button(spec: Mapping[str, Any], element_id: str, where: Mapping[str, Any]) -> dict[str, Any]:
    value = {
        "action_id": str(spec.get("action_id", "")),
        "label": str(spec.get("label", "")),
        **({"value": str(spec["value"])} if spec.get("value") is not None else {}),
        **{key: str(item) for key, item in where.items() if item is not None},
    }
    return {
        "tag": "button",
        "element_id": element_id,
        "text": {"tag": "plain_text", "content": str(spec.get("label", ""))},
        "type": _BUTTON_TYPES.get(str(spec.get("style")), "default"),
        "behaviors": [{"type": "callback", "value": value}],
    }


def with_hints(markdown: str, hints: Sequence[Mapping[str, Any]]) -> str:
    """Card markdown with the hints after it as lines, for a text message (no buttons there)."""
    parts = [markdown]
    for hint in hints:
        elements = hint_elements({**hint, "buttons": []}, 0, {})
        parts.extend(e["content"] for e in elements if e.get("tag") == "markdown")
    return "\n\n".join(parts)


def post_content(markdown: str) -> str:
    """A `post` message holding one markdown paragraph (the text-edit fallback's message)."""
    body = {"zh_cn": {"title": "", "content": [[{"tag": "md", "text": markdown or " "}]]}}
    return json.dumps(body, ensure_ascii=False)


def _text(value: Any) -> str:
    return to_card_markdown(str(value))
