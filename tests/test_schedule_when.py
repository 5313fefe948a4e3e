"""`when` read in the user's time zone (tools/when.py): delays, times, natural recurrences and
cron lines, daylight saving time, and clear errors for what it cannot read."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from tools.when import WhenError, next_at, parse_when

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 12, 2, 14, 0, tzinfo=BERLIN)  # a Wednesday


def _local(ts: float) -> str:
    return datetime.fromtimestamp(ts, BERLIN).strftime("%a %Y-%m-%d %H:%M")


@pytest.mark.parametrize(
    ("said", "first", "recurring"),
    [
        ("in 10 minutes", "Wed 2026-12-02 14:10", False),
        ("in 1 hour 30 minutes", "Wed 2026-12-02 15:30", False),
        ("90s", "Wed 2026-12-02 14:01", False),
        ("at 9", "Thu 2026-12-03 09:00", False),  # 9 has passed today: tomorrow
        ("at 17:30", "Wed 2026-12-02 17:30", False),
        ("5pm", "Wed 2026-12-02 17:00", False),
        ("tomorrow at 8:15", "Thu 2026-12-03 08:15", False),
        ("monday at 9", "Mon 2026-12-07 09:00", False),
        ("2026-12-24 18:00", "Thu 2026-12-24 18:00", False),
        ("2026-12-24T18:00:00+00:00", "Thu 2026-12-24 19:00", False),  # its own offset wins
        ("every weekday at 9", "Thu 2026-12-03 09:00", True),
        ("Every Monday, Friday at 17", "Fri 2026-12-04 17:00", True),
        ("every weekend at 10", "Sat 2026-12-05 10:00", True),
        ("daily at 7:30", "Thu 2026-12-03 07:30", True),
        ("weekly on friday at 16", "Fri 2026-12-04 16:00", True),
        ("monthly on the 1st at 9", "Fri 2027-01-01 09:00", True),
        ("every 2 hours", "Wed 2026-12-02 16:00", True),
        ("0 9 * * 1-5", "Thu 2026-12-03 09:00", True),
        ("cron: 30 8 1 * *", "Fri 2027-01-01 08:30", True),
    ],
)
def test_forms_are_read_in_the_users_zone(said: str, first: str, recurring: bool) -> None:
    when = parse_when(said, BERLIN, NOW)
    assert _local(when.first_at) == first
    assert when.recurring is recurring


def test_a_recurrence_keeps_its_wall_clock_across_daylight_saving_time() -> None:
    when = parse_when("every day at 9", BERLIN, datetime(2026, 3, 27, 10, tzinfo=BERLIN))
    times = [when.first_at]
    for _ in range(3):
        found = next_at(when.spec, BERLIN, times[-1])
        assert found is not None
        times.append(found)
    assert [_local(t)[4:] for t in times] == [
        "2026-03-28 09:00", "2026-03-29 09:00", "2026-03-30 09:00", "2026-03-31 09:00"
    ]  # fmt: skip
    assert times[1] - times[0] == 23 * 3600  # the night the clocks went forward (29 March)


def test_the_smallest_gap_of_a_recurrence_is_known() -> None:
    assert parse_when("* * * * *", BERLIN, NOW).min_gap_s == 60
    assert parse_when("every 30 minutes", BERLIN, NOW).min_gap_s == 1800
    assert parse_when("every monday, friday at 17", BERLIN, NOW).min_gap_s == 3 * 86400
    assert parse_when("in 5 minutes", BERLIN, NOW).min_gap_s == float("inf")


def test_next_at_moves_strictly_forward_and_a_one_shot_ends() -> None:
    once = parse_when("in 1 hour", BERLIN, NOW)
    assert next_at(once.spec, BERLIN, once.first_at - 1) == once.first_at
    assert next_at(once.spec, BERLIN, once.first_at) is None
    hourly = parse_when("every hour", BERLIN, NOW)
    later = NOW.timestamp() + 10 * 3600 + 5  # after ten missed ones: the next, not a catch-up
    assert next_at(hourly.spec, BERLIN, later) == hourly.first_at + 10 * 3600


@pytest.mark.parametrize(
    ("said", "error"),
    [
        ("", "`when` is empty"),
        ("yesterday", "cannot read the time 'yesterday'"),
        ("at 25", "'at 25' is not a time of day"),
        ("every blursday at 9", "'blursday' is not a day of the week"),
        ("2020-01-01 10:00", "is in the past"),
        ("cron 61 * * * *", "not a cron line of 5 fields"),
    ],
)
def test_what_cannot_be_read_is_said_with_the_forms_that_can(said: str, error: str) -> None:
    with pytest.raises(WhenError, match=error.replace("(", r"\(")):
        parse_when(said, BERLIN, NOW)
