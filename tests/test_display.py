"""The display hint vocabulary: plain JSON-ready dicts with a `type`, refusing bad values."""

from __future__ import annotations

import json

import pytest

from tools.display import alert, button, card, confirm


def test_hints_are_plain_json_with_a_type() -> None:
    yes = button("Book it", "book", value="slot-3", style="primary")
    hints = [
        card(
            "Appointment",
            {"When": "Wed 10:00", "Where": None},
            subtitle="Cardiology",
            buttons=[yes],
        ),
        confirm("Book Wednesday 10:00?", [yes, button("Cancel", "cancel")]),
        alert("warning", "Blood pressure is above the usual range.", title="Heads up"),
    ]
    assert json.loads(json.dumps(hints)) == [
        {
            "type": "card",
            "title": "Appointment",
            "fields": [{"label": "When", "value": "Wed 10:00"}],
            "buttons": [
                {"label": "Book it", "action_id": "book", "style": "primary", "value": "slot-3"}
            ],
            "subtitle": "Cardiology",
        },
        {
            "type": "confirm",
            "text": "Book Wednesday 10:00?",
            "buttons": [
                {"label": "Book it", "action_id": "book", "style": "primary", "value": "slot-3"},
                {"label": "Cancel", "action_id": "cancel", "style": "secondary"},
            ],
        },
        {
            "type": "alert",
            "level": "warning",
            "text": "Blood pressure is above the usual range.",
            "title": "Heads up",
        },
    ]
    assert card("Pairs", [("a", 1), ("b", 2.5)])["fields"][1] == {"label": "b", "value": "2.5"}


def test_bad_hints_are_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match="unknown alert level 'fatal'"):
        alert("fatal", "x")
    with pytest.raises(ValueError, match="unknown button style 'loud'"):
        button("x", "y", style="loud")
    with pytest.raises(ValueError, match="at least one button"):
        confirm("sure?", [])
    with pytest.raises(ValueError, match="data:image"):
        card("QR", image="https://evil.example/track.png")
