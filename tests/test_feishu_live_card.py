"""The turn card's own words follow the conversation's language (Live.language)."""

import json

from adapters.base import OutboundContent
from adapters.feishu.live_card import language_of, live_card
from adapters.live import Live, Step


def test_the_stop_button_and_panel_status_are_in_the_conversations_language() -> None:
    live = Live("", "Einen Moment", (Step("t1", "agent", "Scout — Flüge", "timeout"),), "de")
    content = OutboundContent("x", live=live)
    card = json.loads(live_card("x", live.steps, streaming=True, stop={},
                                language=language_of(content)))  # fmt: skip
    elements = card["body"]["elements"]
    panel = next(e for e in elements if e["tag"] == "collapsible_panel")
    button = next(e for e in elements if e["tag"] == "button")
    assert panel["elements"][0]["content"] == "Zeit überschritten"
    assert button["text"]["content"] == "⏹ Anhalten"
    english = json.loads(live_card("x", (), streaming=True, stop={}))
    assert english["body"]["elements"][-1]["text"]["content"] == "⏹ Stop"
