"""The daily cost alert: today's spend so far against the median of the seven days before it.

Checked every `every_s` (hourly) by each serving process, from the `usage` rows priced as `bot
usage` prices them (a model without a price adds nothing). Spend more than
`quotas.cost_alert_factor` times the 7-day median (days with no use count as 0; a median of 0
alerts nothing, there is no baseline yet) is an anomaly: the gauges say so on every process's
/metrics, and one WARNING line is logged per UTC day across all processes (a marker taken once
in the shared quota state, as a soft limit's crossing is).
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from bot.pipeline.quota import Check, QuotaState
from bot.reports.usage import UsageSource
from bot.runtime.config.choices import ModelPrice

log = logging.getLogger(__name__)

BASELINE_DAYS = 7


class CostObserver(Protocol):
    def cost_checked(self, today: float, median: float, anomaly: bool) -> None: ...


@dataclass(frozen=True, slots=True)
class CostCheck:
    day: str  # today, UTC
    today: float
    median: float  # of the BASELINE_DAYS days before
    anomaly: bool


def judge(by_day: Mapping[str, float], today: datetime, factor: float) -> CostCheck:
    """Today's spend against the median of the days before (those with no use: 0)."""
    days = [(today - timedelta(days=n)).date().isoformat() for n in range(1, BASELINE_DAYS + 1)]
    median = statistics.median(by_day.get(day, 0.0) for day in days)
    day = today.date().isoformat()
    spent = by_day.get(day, 0.0)
    return CostCheck(day, spent, median, factor > 0 and median > 0 and spent > factor * median)


class CostWatch:
    def __init__(
        self,
        source: UsageSource,
        prices: Mapping[str, ModelPrice],
        *,
        factor: float,
        marks: QuotaState,
        observer: CostObserver | None = None,
        clock: Callable[[], float] = time.time,
        every_s: float = 3600.0,
    ) -> None:
        self.source = source
        self.prices = prices
        self.factor = factor
        self.marks = marks
        self.observer = observer
        self.clock = clock
        self.every_s = every_s

    async def run(self) -> None:
        """Check now, then every `every_s`, until cancelled; a failed check is logged."""
        while True:
            try:
                await self.check()
            except Exception as exc:  # a report, never worth the process: next hour again
                log.warning("cost check failed: %s", exc)
            await asyncio.sleep(self.every_s)

    async def check(self) -> CostCheck:
        now = datetime.fromtimestamp(self.clock(), UTC)
        since = (now - timedelta(days=BASELINE_DAYS)).date().isoformat()
        by_day: dict[str, float] = {}
        for row in await self.source.usage_totals(since):
            price = self.prices.get(row.model)
            if price is not None:
                cost = (
                    row.input_tokens * price.input_per_mtok
                    + row.output_tokens * price.output_per_mtok
                )
                by_day[row.day] = by_day.get(row.day, 0.0) + cost / 1_000_000
        found = judge(by_day, now, self.factor)
        if self.observer is not None:
            self.observer.cost_checked(found.today, found.median, found.anomaly)
        if found.anomaly and await self._first_today(found.day, now):
            log.warning(
                "cost alert: %.4f spent today (%s UTC so far) is more than %g× the %d-day"
                " median of %.4f (quotas.cost_alert_factor)",
                found.today, found.day, self.factor, BASELINE_DAYS, found.median,
            )  # fmt: skip
        return found

    async def _first_today(self, day: str, now: datetime) -> bool:
        """Whether this process is the first to alert `day` (shared marker, kept two days)."""
        expires = now.timestamp() + 2 * 86400
        return await self.marks.take([Check(f"cost-alert:{day}", 1, None, expires)]) is None
