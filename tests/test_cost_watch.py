"""The daily cost alert: today's spend against its 7-day median, from real usage rows and prices;
the gauges on /metrics, one log line a day however many checks (and processes) see it."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiohttp import ClientSession

from bot.ops.cost_watch import CostWatch, judge
from bot.ops.metrics import Metrics
from bot.pipeline.quota import MemoryQuotaState
from bot.runtime.config.choices import ModelPrice
from bot.storage import SqliteStore
from tests.conftest import Running

NOON = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
PRICES = {"m": ModelPrice(input_per_mtok=1.0, output_per_mtok=0.0)}  # $1 per million tokens in


def test_judge_takes_days_without_use_as_zero() -> None:
    days = {(NOON - timedelta(days=n)).date().isoformat(): 1.0 for n in range(1, 8)}
    assert judge(days | {"2026-03-10": 3.5}, NOON, 3).anomaly
    assert not judge(days | {"2026-03-10": 3.0}, NOON, 3).anomaly  # not more than 3×
    assert not judge(days | {"2026-03-10": 9.0}, NOON, 0).anomaly  # factor 0: off
    sparse = {"2026-03-09": 1.0, "2026-03-08": 1.0, "2026-03-10": 50.0}
    found = judge(sparse, NOON, 3)  # five of seven days unused: the median is 0, no baseline
    assert (found.median, found.anomaly) == (0.0, False)


async def _spend(path: Path, dollars_by_day: dict[str, float]) -> None:
    async with SqliteStore(path) as store:
        session = await store.create_session(
            agent_id="default", channel="telegram", conversation_key="telegram:1", user_id="u"
        )
        for day, dollars in dollars_by_day.items():
            await store.record_usage(
                session_id=session,
                turn_id=day,
                provider="openai",
                model="m",
                input_tokens=int(dollars * 1_000_000),
                output_tokens=0,
            )
    with sqlite3.connect(path) as db:
        for day in dollars_by_day:
            stamp = f"{day}T08:00:00+00:00"
            db.execute("update usage set created_at = ? where turn_id = ?", (stamp, day))


async def test_a_day_over_the_factor_raises_the_gauge_and_logs_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    week = {(NOON - timedelta(days=n)).date().isoformat(): 1.0 + n / 10 for n in range(1, 8)}
    await _spend(tmp_path / "bot.db", week | {"2026-03-10": 5.0, "2026-02-01": 100.0})
    metrics = Metrics()
    marks = MemoryQuotaState(clock=NOON.timestamp)
    async with SqliteStore(tmp_path / "bot.db") as store:
        # two processes' watches sharing one quota state: one line between them
        watches = [
            CostWatch(store, PRICES, factor=3, marks=marks, observer=metrics, clock=NOON.timestamp)
            for _ in range(2)
        ]
        with caplog.at_level(logging.WARNING, logger="bot.ops.cost_watch"):
            found = [await watch.check() for watch in watches + watches]
    assert found[0].today == pytest.approx(5.0) and found[0].median == pytest.approx(1.4)
    assert all(f.anomaly for f in found)
    alerts = [r for r in caplog.records if "cost alert" in r.getMessage()]
    assert len(alerts) == 1, caplog.text
    assert "5.0000 spent today (2026-03-10 UTC so far)" in alerts[0].getMessage()
    text = metrics.render().decode()
    assert "gateway_cost_anomaly 1.0" in text
    assert "gateway_cost_today 5.0" in text
    assert "gateway_cost_median_7d 1.4" in text


async def test_an_ordinary_day_is_no_alert(tmp_path: Path) -> None:
    week = {(NOON - timedelta(days=n)).date().isoformat(): 2.0 for n in range(1, 8)}
    await _spend(tmp_path / "bot.db", week | {"2026-03-10": 5.0})
    metrics = Metrics()
    async with SqliteStore(tmp_path / "bot.db") as store:
        watch = CostWatch(
            store, PRICES, factor=3, marks=MemoryQuotaState(), observer=metrics,
            clock=NOON.timestamp,
        )  # fmt: skip
        found = await watch.check()
    assert (found.today, found.median, found.anomaly) == (5.0, 2.0, False)
    assert "gateway_cost_anomaly 0.0" in metrics.render().decode()


async def test_a_serving_app_checks_its_cost_at_start(
    running: Running, session: ClientSession, tmp_path: Path
) -> None:
    """A busy day already in the database when the app starts: its first check says so."""
    now = datetime.now(UTC)
    week = {(now - timedelta(days=n)).date().isoformat(): 1.0 for n in range(1, 8)}
    await _spend(tmp_path / "bot.db", week | {now.date().isoformat(): 4.0})
    app = await running(usage={"prices": {"m": {"input_per_mtok": 1.0, "output_per_mtok": 0}}})

    async def scraped() -> str:
        async with session.get(f"{app.url}/metrics") as response:
            return await response.text()

    async with asyncio.timeout(60):
        # noqa below: no event marks what a scrape shows; the check runs once the app started
        while "gateway_cost_anomaly 1.0" not in (text := await scraped()):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    assert "gateway_cost_today 4.0" in text and "gateway_cost_median_7d 1.0" in text
