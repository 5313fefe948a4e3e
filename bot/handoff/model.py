"""The handoff's vocabulary: statuses, settings, what an operator action comes to, and errors."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Literal

from bot.runtime.config.handoff import HandoffConfig, Hours, Place, parse_hours, parse_place

Status = Literal["waiting", "human", "released", "resolved", "withdrawn", "expired"]
OPEN: Final[tuple[Status, ...]] = ("waiting", "human")
CLOSED: Final[tuple[Status, ...]] = ("released", "resolved", "withdrawn", "expired")
# the conversation state's settings the handoff keeps: the open handoff's id, and a request a
# tool made during a turn, switched to once that turn's final reply is out (relay.py)
OPEN_SETTING: Final = "handoff"
ASKED_SETTING: Final = "handoff_asked"
# the Slack buttons' action ids (the value is the handoff id)
ACTIONS: Final = {
    "handoff.take": "take",
    "handoff.release": "release",
    "handoff.resolve": "resolve",
}


@dataclass(frozen=True, slots=True)
class HandoffSettings:
    place: Place | None = None
    hours: Hours | None = None
    hours_text: str = ""
    queue_timeout_s: float = 600.0
    admin_url: str | None = None  # the admin view's address, linked from the operator place

    @classmethod
    def of(cls, config: HandoffConfig) -> HandoffSettings:
        return cls(
            place=parse_place(config.place) if config.place else None,
            hours=parse_hours(config.hours) if config.hours else None,
            hours_text=config.hours or "",
            queue_timeout_s=config.queue_timeout_s,
            admin_url=config.admin_url.rstrip("/") if config.admin_url else None,
        )

    def open_now(self, now: float) -> bool:
        return self.hours is None or self.hours.open_at(datetime.fromtimestamp(now, UTC))


@dataclass(frozen=True, slots=True)
class Operator:
    """Who acts: a stable id (`slack:U123`, `admin:Ana`) and the name the user sees."""

    id: str
    name: str


@dataclass(frozen=True, slots=True)
class Asked:
    """A request the model (or the user's `/human`) made, kept in the conversation's state until
    the turn running ends: the switch never races its final."""

    reason: str
    summary: str
    user_id: str
    user_name: str | None = None
    via: str = "tool"  # or "/human": what the audit names

    def dumps(self) -> str:
        return json.dumps(
            [self.reason, self.summary, self.user_id, self.user_name, self.via], ensure_ascii=False
        )

    @classmethod
    def loads(cls, text: str) -> Asked:
        reason, summary, user_id, user_name, *via = json.loads(text)  # older: no `via`
        return cls(reason, summary, user_id, user_name, *via[:1])


class HandoffError(Exception):
    """An operator action that cannot be done; the message says why, for the operator."""


class AlreadyTaken(HandoffError):
    """Another operator holds the conversation (the Take that lost the race)."""

    def __init__(self, holder: str) -> None:
        super().__init__(f"already taken by {holder}")
        self.holder = holder


class NotOpen(HandoffError):
    """The handoff ended (released, resolved, withdrawn or expired) or never was."""


def clock_text(at: float) -> str:
    """10:02 (UTC): how the marker and the operator place show a time."""
    return datetime.fromtimestamp(at, UTC).strftime("%H:%M")
