"""`InboundMessage` to JSON and back, for queues other processes read."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from adapters.base import Action, Attachment, ChatRef, InboundMessage
from content.parts import part_from_json, part_to_json


def dump(message: InboundMessage) -> str:
    data = asdict(message)
    if message.parts:  # in the parts' own JSON form (content/parts.py), not asdict's nesting
        data["parts"] = [part_to_json(part) for part in message.parts]
    try:  # one pass: the payload was encoded twice, once only to see whether it could be
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        data["raw"] = {}  # the platform's payload is for reference only; the rest is the message
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def load(text: str) -> InboundMessage:
    data: dict[str, Any] = json.loads(text)
    data["chat"] = ChatRef(**data["chat"])
    data["attachments"] = tuple(Attachment(**a) for a in data["attachments"])
    # a message queued by a process of the version before parts has none
    data["parts"] = tuple(part_from_json(p) for p in data.get("parts", ()))
    if data["action"] is not None:
        data["action"] = Action(**data["action"])
    return InboundMessage(**data)
