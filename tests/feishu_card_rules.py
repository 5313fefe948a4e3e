"""What the fake Feishu checks in card JSON 2.0, and its error (tests/feishu_fake.py)."""

from __future__ import annotations

import re
from typing import Any


class FeishuError(Exception):
    def __init__(self, code: int, msg: str, status: int = 400, reset: float | None = None) -> None:
        super().__init__(msg)
        self.code, self.msg, self.status, self.reset = code, msg, status, reset


_ELEMENT_ID = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,19}")


def check_card(card: dict[str, Any]) -> None:
    """Card JSON 2.0 as CardKit checks it (the parts our cards use)."""
    if card.get("schema") != "2.0":
        raise FeishuError(300301, "only card JSON 2.0 here")
    seen: set[str] = set()

    def walk(elements: list[dict[str, Any]], inside_panel: bool) -> None:
        for element in elements:
            element_id = element.get("element_id")
            if element_id is not None:
                if not isinstance(element_id, str) or not _ELEMENT_ID.fullmatch(element_id):
                    raise FeishuError(300301, f"invalid element_id {element_id!r}")
                if element_id in seen:
                    raise FeishuError(300301, f"duplicate element_id {element_id}")
                seen.add(element_id)
            tag = element.get("tag")
            if tag == "form" and inside_panel:
                raise FeishuError(300301, "a collapsible_panel cannot hold a form")
            if tag == "collapsible_panel":
                title = (element.get("header") or {}).get("title") or {}
                if title.get("tag") not in ("plain_text", "markdown"):
                    raise FeishuError(300301, "collapsible_panel needs header.title")
                walk(element.get("elements") or [], True)
            if tag == "button" and not (element.get("text") and element.get("behaviors")):
                raise FeishuError(300301, "a button needs text and behaviors")

    walk(card.get("body", {}).get("elements", []), False)
