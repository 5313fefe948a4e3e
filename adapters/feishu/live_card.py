"""A turn's one card as card JSON 2.0: the answer, a panel per specialist, the tools, a stop button.

The answer (or, before it streams, the note: "Thinking…", "Asking Researcher…") is the markdown
element `ANSWER`, the one a stream writes. Under it each specialist is a `collapsible_panel`
whose header shows its title and how it stands (⏳ running, ✅ completed, ❌ failed, ⏹ killed,
⌛ timeout), and the labelled tools share one compact markdown element (`TOOLS`), a line each.
While the turn runs the card has a stop button whose callback value says who may press it;
the final card has none. Display hints follow, as in cards.py.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from adapters.base import OutboundContent
from adapters.feishu.cards import ANSWER, hint_elements
from adapters.feishu.render import plain_text, rendered_length, to_card_markdown
from adapters.live import Step
from content.texts import DEFAULT_LANGUAGE, t

TOOLS = "tools"  # the element_id of the tools' lines
STOP = "stop"  # the stop button's element_id
STOP_ACTION = "feishu.stop"  # its callback's action_id: the press becomes "/stop"
ICONS = {"running": "⏳", "completed": "✅", "failed": "❌", "killed": "⏹", "timeout": "⌛"}
MAX_PANELS = 20  # specialists shown as panels; more are counted in one line


def shown_text(content: OutboundContent, limit: int) -> str:
    """The answer element's card markdown: the live answer (else its note) when it fits in
    `limit` bytes, else the delivery's own text (a part of an answer too long for one card)."""
    live = content.live
    if live is not None:
        text = live.answer or live.note
        if rendered_length(text) <= limit:
            return to_card_markdown(text)
    return to_card_markdown(content.text)


def steps_of(content: OutboundContent) -> tuple[Step, ...]:
    return content.live.steps if content.live is not None else ()


def language_of(content: OutboundContent) -> str:
    """The conversation's language, for the card's own words (the button, a panel's status)."""
    return content.live.language if content.live is not None else DEFAULT_LANGUAGE


def live_card(
    markdown: str,
    steps: Sequence[Step],
    *,
    streaming: bool,
    stop: Mapping[str, Any] | None = None,
    hints: Sequence[Mapping[str, Any]] = (),
    where: Mapping[str, Any] | None = None,
    summary: str | None = None,
    language: str = DEFAULT_LANGUAGE,
) -> str:
    """The whole card as the JSON string CardKit takes. `markdown` is already card markdown;
    `stop`: the stop button's callback value (None: no button)."""
    config: dict[str, Any] = {"update_multi": True, "streaming_mode": streaming}
    config["summary"] = {"content": summary if summary is not None else plain_text(markdown, 60)}
    if streaming:
        config["streaming_config"] = {"print_frequency_ms": {"default": 30}}
    elements: list[dict[str, Any]] = [
        {"tag": "markdown", "element_id": ANSWER, "content": markdown or " "}
    ]
    elements.extend(step_elements(steps, language))
    if stop is not None:
        elements.append(stop_button(stop, language))
    for index, hint in enumerate(hints):
        elements.extend(hint_elements(hint, index, where or {}))
    card = {"schema": "2.0", "config": config, "body": {"elements": elements}}
    return json.dumps(card, ensure_ascii=False)


def step_elements(steps: Sequence[Step], language: str = DEFAULT_LANGUAGE) -> list[dict[str, Any]]:
    agents = [step for step in steps if step.kind == "agent"]
    tools = [step for step in steps if step.kind == "tool"]
    elements = [panel(n, step, language) for n, step in enumerate(agents[:MAX_PANELS])]
    lines = [f"{ICONS.get(step.status, '⏳')} {_plain(step.title)}" for step in tools]
    if len(agents) > MAX_PANELS:
        more = agents[MAX_PANELS:]
        running = sum(step.running for step in more)
        lines.insert(0, t(language, "step.more", count=len(more), running=running))
    if lines:
        elements.append({"tag": "markdown", "element_id": TOOLS, "content": "\n".join(lines)})
    return elements


def panel(number: int, step: Step, language: str = DEFAULT_LANGUAGE) -> dict[str, Any]:
    """A specialist as a collapsed panel: its status and title in the header, the status in
    words inside."""
    icon = ICONS.get(step.status, "⏳")
    return {
        "tag": "collapsible_panel",
        "element_id": f"agent_{number}",
        "expanded": False,
        "header": {"title": {"tag": "markdown", "content": f"{icon} {_plain(step.title)}"}},
        "elements": [
            {
                "tag": "markdown",
                "element_id": f"agent_{number}_s",
                "content": t(language, f"step.{step.status}")
                if step.status in ICONS
                else step.status,
            }
        ],
    }


def stop_button(value: Mapping[str, Any], language: str = DEFAULT_LANGUAGE) -> dict[str, Any]:
    return {
        "tag": "button",
        "element_id": STOP,
        "text": {"tag": "plain_text", "content": t(language, "turn.stop_button")},
        "type": "danger",
        "size": "small",
        "behaviors": [{"type": "callback", "value": {"action_id": STOP_ACTION, **value}}],
    }


def _plain(text: str) -> str:
    return to_card_markdown(text.replace("\n", " "))
