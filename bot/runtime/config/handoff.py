"""The `handoff` section: where operators work, when they are there, how long a request waits.

`place` is `slack:<instance>/<channel id>` (the Slack instance's id, then the channel operators
read); `hours` is `<days> <HH:MM>-<HH:MM> [<time zone>]`, e.g. `mon-fri 09:00-17:30
Europe/Berlin` (null: always). Outside the hours, or with no place, `/human` and the tool say so
and the bot stays in charge; the admin view's "take over" works whenever the view is on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, time
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, field_validator

from bot.pipeline.places import Place as Place  # the handoff's, where it always was
from bot.pipeline.places import parse_place as parse_place

DAYS: Final = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_HOURS = re.compile(
    r"(?P<first>[a-z]{3})(?:-(?P<last>[a-z]{3}))?\s+(?P<start>\d\d:\d\d)-(?P<end>\d\d:\d\d)"
    r"(?:\s+(?P<zone>\S+))?"
)


@dataclass(frozen=True, slots=True)
class Hours:
    """Days of the week (0 = Monday) and a daily window, in a time zone."""

    days: frozenset[int]
    start: time
    end: time
    zone: str = "UTC"

    def open_at(self, moment: datetime) -> bool:
        local = moment.astimezone(ZoneInfo(self.zone))
        return local.weekday() in self.days and self.start <= local.time() < self.end


def parse_hours(value: str) -> Hours:
    match = _HOURS.fullmatch(_lower_days(value.strip()))
    if match is None:
        raise ValueError(
            f"expected `<days> HH:MM-HH:MM [time zone]`, e.g. `mon-fri 09:00-17:30"
            f" Europe/Berlin`; got {value!r}"
        )
    first, last = match.group("first"), match.group("last") or match.group("first")
    if first not in DAYS or last not in DAYS:
        raise ValueError(f"days are {', '.join(DAYS)}; got {value!r}")
    a, b = DAYS.index(first), DAYS.index(last)
    days = frozenset(range(a, b + 1)) if a <= b else frozenset([*range(a, 7), *range(b + 1)])
    try:
        start = time.fromisoformat(match.group("start"))
        end = time.fromisoformat(match.group("end"))
    except ValueError as exc:
        raise ValueError(f"{value!r}: {exc}") from None
    if end <= start:
        raise ValueError(f"{value!r}: the window must end after it starts")
    zone = match.group("zone") or "UTC"
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown time zone {zone!r}; use an IANA name like Europe/Berlin"
        ) from None
    return Hours(days, start, end, zone)


def _lower_days(value: str) -> str:
    head, _, rest = value.partition(" ")
    return f"{head.lower()} {rest}"


class HandoffConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)

    place: str | None = None  # slack:<instance>/<channel id>; null: no operator channel
    hours: str | None = None  # null: operators answer at any hour
    queue_timeout_s: float = 600.0  # nobody took it by then: back to the bot, with an apology
    admin_url: str | None = None  # the admin view's public address, for links in the place

    @field_validator("place")
    @classmethod
    def _place(cls, value: str | None) -> str | None:
        if value:
            parse_place(value)
        return value or None

    @field_validator("hours")
    @classmethod
    def _hours(cls, value: str | None) -> str | None:
        if value:
            parse_hours(value)
        return value or None

    @field_validator("queue_timeout_s")
    @classmethod
    def _positive(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("expected a number of seconds above 0")
        return value
