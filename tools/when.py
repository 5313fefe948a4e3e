"""`when` for a scheduled message: a time, a delay or a recurrence, in the user's time zone.

Accepted (case does not matter):
- a delay: `in 10 minutes`, `in 2h`, `in 1 hour 30 minutes`, `90s`;
- a time: `2026-12-24 18:00` or ISO 8601 (without an offset: in the user's zone), `at 9`,
  `at 17:30`, `9am`, `tomorrow at 8`, `today 18:00`, `monday at 9` (the next one);
- a recurrence: a 5-field cron line (`0 9 * * 1-5`, optionally after `cron:`), or
  `every weekday at 9`, `every day at 7:30`, `every monday, friday at 17`, `every weekend at
  10`, `every hour`, `every 30 minutes`, `daily at 9`, `hourly`, `weekly on friday at 16`,
  `monthly on the 1st at 9`.

Every form becomes one normalized `spec` the store keeps and the scheduler reads back:
`at:<unix s>`, `cron:<expr>` (its wall clock in the schedule's zone, DST handled by croniter)
or `every:<seconds>:<anchor unix s>`. Natural recurrences are written as cron lines, so there
is one recurrence engine (croniter), not two.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

FORMS = (
    "'in 10 minutes', 'at 9', 'tomorrow at 8:30', '2026-12-24 18:00', "
    "'every weekday at 9', 'every monday at 17', 'every 30 minutes', or a cron line '0 9 * * 1-5'"
)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_DELAY = re.compile(
    r"(\d+(?:\.\d+)?)\s*(s|sec|secs|seconds?|m|min|mins|minutes?|h|hrs?|hours?|d|days?|w|weeks?)\b"
)
_CLOCK = re.compile(r"(?:at\s+)?(\d{1,2})(?::(\d{2}))?\s*(am|pm)?$")
_SAMPLES = 24  # occurrences looked at to find a cron line's smallest gap


class WhenError(ValueError):
    """`when` is not a form we read, or names no time in the future; the text says which."""


@dataclass(frozen=True, slots=True)
class When:
    spec: str  # normalized: at:<ts> | cron:<expr> | every:<seconds>:<anchor>
    first_at: float  # unix seconds of the first occurrence
    recurring: bool
    min_gap_s: float  # the shortest time between two occurrences (inf for a one-shot)


def parse_when(text: str, zone: ZoneInfo, now: datetime) -> When:
    """`text` read in `zone`, from `now` (aware). WhenError names the forms we read."""
    said = " ".join(text.strip().lower().replace(",", " , ").split()).replace(" , ", ",")
    if not said:
        raise WhenError(f"`when` is empty; say for example {FORMS}")
    local = now.astimezone(zone)
    for read in (_cron, _every, _delay, _moment):
        when = read(said, zone, local)
        if when is not None:
            if when.first_at <= now.timestamp() - 1:
                raise WhenError(
                    f"{text!r} is in the past (now is {local:%Y-%m-%d %H:%M} {zone.key})"
                )
            return when
    raise WhenError(f"cannot read the time {text!r}; say for example {FORMS}")


def next_at(spec: str, zone: ZoneInfo, after: float) -> float | None:
    """The first occurrence of `spec` strictly after `after` (unix s); None when it has none."""
    kind, _, rest = spec.partition(":")
    if kind == "at":
        at = float(rest)
        return at if at > after else None
    if kind == "every":
        step, anchor = (float(v) for v in rest.split(":"))
        if after < anchor:
            return anchor
        return anchor + (int((after - anchor) // step) + 1) * step
    if kind == "cron":
        start = datetime.fromtimestamp(after, zone)
        return float(croniter(rest, start).get_next(datetime).timestamp())
    raise WhenError(f"unknown schedule spec {spec!r}")


def _cron(said: str, zone: ZoneInfo, now: datetime) -> When | None:
    expr = said.removeprefix("cron:").removeprefix("cron").strip()
    if len(expr.split()) != 5 or not croniter.is_valid(expr):
        if said.startswith("cron"):
            raise WhenError(
                f"{expr!r} is not a cron line of 5 fields (minute hour day month weekday)"
            )
        return None
    return _cron_when(expr, zone, now)


def _cron_when(expr: str, zone: ZoneInfo, now: datetime) -> When:
    it = croniter(expr, now)
    times = [it.get_next(datetime).timestamp() for _ in range(_SAMPLES)]
    gap = min(b - a for a, b in zip(times, times[1:], strict=False))
    return When(f"cron:{expr}", times[0], True, gap)


def _every(said: str, zone: ZoneInfo, now: datetime) -> When | None:
    for word in ("daily", "weekdays"):
        if said.startswith(word):
            said = f"every {'day' if word == 'daily' else 'weekday'}{said[len(word) :]}"
    if said in ("hourly", "every hour"):
        said = "every 1 hour"
    if said.startswith("weekly on ") or said.startswith("monthly on "):
        said = "every " + said.split(" ", 1)[1].removeprefix("on ")
    if not said.startswith("every "):
        return None
    rest = said[len("every ") :].strip()
    interval = _DELAY.fullmatch(rest.removeprefix("every ").strip()) or re.fullmatch(
        r"(\d+)\s*(minutes?|hours?|mins?|h|m)", rest
    )
    if interval is not None:
        seconds = _seconds(interval.group(1), interval.group(2))
        return When(
            f"every:{seconds:g}:{now.timestamp() + seconds:.3f}",
            now.timestamp() + seconds,
            True,
            seconds,
        )
    days, _, clock = rest.partition(" at ")
    hour, minute = _clock(clock.strip()) if clock else (9, 0)
    days = days.strip()
    month_day = re.fullmatch(r"(?:the\s+)?(\d{1,2})(?:st|nd|rd|th)?", days)
    if month_day is not None:
        expr = f"{minute} {hour} {int(month_day.group(1))} * *"
    else:
        expr = f"{minute} {hour} * * {_weekdays(days)}"
    if not croniter.is_valid(expr):
        raise WhenError(f"cannot read the recurrence {said!r}; say for example {FORMS}")
    return _cron_when(expr, zone, now)


def _weekdays(days: str) -> str:
    if days in ("day", "days", "morning", ""):
        return "*"
    if days in ("weekday", "weekdays", "workday", "workdays", "business day"):
        return "1-5"
    if days in ("weekend", "weekends"):
        return "6,0"
    picked = []
    for word in re.split(r"[,\s]+|\band\b", days):
        if not word:
            continue
        found = [
            i
            for i, name in enumerate(_DAYS)
            if name.startswith(word.rstrip("s")[:3]) and len(word) >= 3
        ]
        if not found:
            raise WhenError(f"{word!r} is not a day of the week; say for example {FORMS}")
        picked.append((found[0] + 1) % 7)  # cron: 0 is Sunday
    return ",".join(str(d) for d in sorted(set(picked)))


def _delay(said: str, zone: ZoneInfo, now: datetime) -> When | None:
    rest = said.removeprefix("in ").removeprefix("after ").replace(" and ", " ").strip()
    parts = _DELAY.findall(rest)
    if not parts or _DELAY.sub("", rest).strip():
        return None
    seconds = sum(_seconds(n, unit) for n, unit in parts)
    at = now.timestamp() + seconds
    return When(f"at:{at:.3f}", at, False, float("inf"))


def _moment(said: str, zone: ZoneInfo, now: datetime) -> When | None:
    try:
        parsed = datetime.fromisoformat(said.replace(" ", "T", 1).upper())
    except ValueError:
        parsed = None
    if parsed is not None:
        moment = parsed if parsed.tzinfo else parsed.replace(tzinfo=zone)
        return When(f"at:{moment.timestamp():.3f}", moment.timestamp(), False, float("inf"))
    words = said.replace(" at ", " ").split(" ", 1)
    day = now.date()
    named = True
    if words[0] == "tomorrow":
        day += timedelta(days=1)
    elif words[0] == "today":
        pass
    elif words[0] in _DAYS:
        ahead = (_DAYS.index(words[0]) - now.weekday()) % 7
        day += timedelta(days=ahead)
    else:
        named = False
    clock = (words[1] if len(words) > 1 else "9") if named else said
    if _CLOCK.fullmatch(clock.strip()) is None:
        return None
    hour, minute = _clock(clock.strip())
    moment = datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone)
    if moment <= now and words[0] != "today":
        moment += timedelta(days=7 if words[0] in _DAYS else 1)
    return When(f"at:{moment.timestamp():.3f}", moment.timestamp(), False, float("inf"))


def _clock(text: str) -> tuple[int, int]:
    found = _CLOCK.fullmatch(text.strip())
    if found is None:
        raise WhenError(
            f"cannot read the time of day {text!r}; say for example 'at 9' or 'at 17:30'"
        )
    hour, minute = int(found.group(1)), int(found.group(2) or 0)
    if found.group(3) == "pm" and hour < 12:
        hour += 12
    elif found.group(3) == "am" and hour == 12:
        hour = 0
    if hour > 23 or minute > 59:
        raise WhenError(f"{text!r} is not a time of day")
    return hour, minute


def _seconds(number: str, unit: str) -> float:
    return float(number) * _UNITS["m" if unit.startswith("mi") else unit[0]]
