"""`InboundMessage` to JSON and back, for queues other processes read.

Processes of two versions share the queues during a rolling upgrade: `load` reads a message of
an older version (a field it lacks takes its default) and of a newer one (a field this version
does not know is dropped), so neither side fails on the other's messages.
"""

from __future__ import annotations

import json
from dataclasses import fields
from functools import cache
from typing import Any

from adapters.base import Action, Attachment, ChatRef, InboundMessage
from content.parts import part_from_json, part_to_json


def dump(message: InboundMessage) -> str:
    # The fields as `dataclasses.asdict` gives them, without its deep copy of every value (a
    # third of a turn's queueing CPU in Redis mode): JSON only reads them.
    data = _plain(message)
    data["chat"] = _plain(message.chat)
    data["attachments"] = [_plain(a) for a in message.attachments]
    data["parts"] = [part_to_json(part) for part in message.parts]  # content/parts.py's form
    if message.action is not None:
        data["action"] = _plain(message.action)
    try:  # one pass: the payload was encoded twice, once only to see whether it could be
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        data["raw"] = {}  # the platform's payload is for reference only; the rest is the message
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def load(text: str) -> InboundMessage:
    data = _known(InboundMessage, json.loads(text))
    data["chat"] = ChatRef(**_known(ChatRef, data["chat"]))
    data["attachments"] = tuple(
        Attachment(**_known(Attachment, a)) for a in data.get("attachments", ())
    )
    # a message queued by a process of the version before parts has none
    data["parts"] = tuple(part_from_json(p) for p in data.get("parts", ()))
    if data.get("action") is not None:
        data["action"] = Action(**_known(Action, data["action"]))
    return InboundMessage(**data)


def _plain(obj: InboundMessage | ChatRef | Attachment | Action) -> dict[str, Any]:
    cls: type = type(obj)
    return {name: getattr(obj, name) for name in _order(cls)}


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    """`data` without the fields `cls` does not have (a newer version's)."""
    names = _names(cls)
    return {k: v for k, v in data.items() if k in names}


@cache
def _names(cls: type) -> frozenset[str]:
    return frozenset(_order(cls))


@cache
def _order(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))
