"""`bot usage` and the admin's usage: model calls, tokens and cost, grouped by user, model, ….

Cost comes from `usage.prices` in config (per million input and output tokens, keyed by the
model name recorded in each usage row); no price is built in. A group with any call to a model
without a price has no cost (None, "-"), and the report names those models.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import date
from typing import Any, Literal, Protocol

from bot.runtime.config.schema import ModelPrice
from bot.storage.rows import UsageTotalRow

Dimension = Literal["user", "model", "channel", "day"]
DIMENSIONS: tuple[Dimension, ...] = ("user", "model", "channel", "day")


class UsageSource(Protocol):
    async def usage_totals(self, since: str | None) -> list[UsageTotalRow]: ...


@dataclass
class UsageLine:
    key: tuple[str, ...]
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = 0.0

    def add(self, row: UsageTotalRow, price: ModelPrice | None) -> None:
        self.calls += row.calls
        self.input_tokens += row.input_tokens
        self.output_tokens += row.output_tokens
        if price is None or self.cost is None:
            self.cost = None
        else:
            self.cost += (
                row.input_tokens * price.input_per_mtok + row.output_tokens * price.output_per_mtok
            ) / 1_000_000


@dataclass
class UsageReport:
    by: tuple[Dimension, ...]
    since: str | None
    lines: list[UsageLine]
    total: UsageLine
    unpriced_models: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        def line(item: UsageLine) -> dict[str, Any]:
            fields = asdict(item)
            key = fields.pop("key")
            return dict(zip(self.by, key, strict=True)) | fields

        total = asdict(self.total)
        del total["key"]
        return {
            "by": list(self.by),
            "since": self.since,
            "rows": [line(item) for item in self.lines],
            "total": total,
            "unpriced_models": self.unpriced_models,
        }


def parse_since(text: str) -> str:
    """A `--since` date (YYYY-MM-DD, a UTC day) as the ISO prefix usage rows compare to."""
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError:
        raise ValueError(f"--since: expected a date like 2026-01-31, got {text!r}") from None


async def usage_report(
    source: UsageSource,
    prices: Mapping[str, ModelPrice],
    *,
    by: Sequence[Dimension] = ("model",),
    since: str | None = None,
) -> UsageReport:
    """Usage rows since `since` (a date; None: all), summed per `by` key, costliest first."""
    lines: dict[tuple[str, ...], UsageLine] = {}
    total = UsageLine(("total", *[""] * (len(by) - 1)))
    unpriced: set[str] = set()
    for row in await source.usage_totals(since):
        price = prices.get(row.model)
        if price is None:
            unpriced.add(row.model)
        key = tuple(_value(row, d) for d in by)
        lines.setdefault(key, UsageLine(key)).add(row, price)
        total.add(row, price)
    ordered = sorted(lines.values(), key=lambda x: x.key)
    if "day" not in by:  # days read in order; anything else, biggest first
        ordered.sort(key=lambda x: (x.cost or 0.0, x.input_tokens + x.output_tokens), reverse=True)
    return UsageReport(tuple(by), since, ordered, total, sorted(unpriced))


def format_report(report: UsageReport) -> str:
    header = (*report.by, "calls", "tokens in", "tokens out", "cost")
    rows = [_cells(line) for line in [*report.lines, report.total]]
    if not report.lines:
        return "no model calls recorded" + (f" since {report.since}" if report.since else "")
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=True)]
    keys = len(report.by)

    def render(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i < keys else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    out = [render(header), *(render(r) for r in rows[:-1]), render(rows[-1])]
    if report.unpriced_models:
        out.append(f"no price in usage.prices for: {', '.join(report.unpriced_models)}")
    return "\n".join(out)


def _cells(line: UsageLine) -> tuple[str, ...]:
    cost = "-" if line.cost is None else f"{line.cost:.4f}"
    numbers = (f"{line.calls:,}", f"{line.input_tokens:,}", f"{line.output_tokens:,}", cost)
    # user ids come from clients (an API key holder names its users): no control characters
    # reach the operator's terminal, where an escape sequence could rewrite what it shows
    return (*(_CONTROLS.sub(_visible, key) for key in line.key), *numbers)


_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _visible(match: re.Match[str]) -> str:
    return repr(match.group())[1:-1]  # "\x1b" as four characters


def _value(row: UsageTotalRow, dimension: Dimension) -> str:
    if dimension == "user":
        return f"{row.channel}:{row.user_id}"
    if dimension == "model":
        return row.model
    return row.channel if dimension == "channel" else row.day
