"""Scheduled messages at volume: 100,000 schedules stored, 1,000 due per second.

One process's `ScheduleRunner` (bot/schedules/runner.py) on a SQLite store (or PostgreSQL with
`--url`) holding `--stored` schedules, of which `--rate` per second fall due during `--seconds`
(spread evenly over each second) and the rest days later (they only weigh on the index). Each
occurrence is a fixed text sent to a counting channel that records when it was asked to send:
the platform's own cost is not ours (bench/telegram_bench.py and the others measure the
channels), and no platform takes 1,000 messages a second from one bot anyway. Printed: the
process CPU per fired message (time.process_time over the window, so the store's work and the
claim queries count), and the delay from each due time to its send (p50/p99/max; goal: p99 ≤ 1 s).

    python bench/schedule_bench.py [--stored 100000] [--rate 1000] [--seconds 20] [--poll 0.5]
    python bench/schedule_bench.py --url postgresql://127.0.0.1/sched_bench  # a database of
        its own: its `schedules` rows are deleted first
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import asyncpg  # noqa: E402

from adapters.base import ChannelLimits, ChatRef, MessageHandle, OutboundContent  # noqa: E402
from bench.percentiles import ms  # noqa: E402
from bot.schedules.runner import ScheduleRunner  # noqa: E402
from bot.schedules.settings import SchedulesConfig  # noqa: E402
from bot.storage import SqliteStore  # noqa: E402
from bot.storage.backends import AnyStore, build_store  # noqa: E402
from bot.storage.schedules import ScheduleRow  # noqa: E402
from bot.storage.tables import schedules  # noqa: E402


class CountingChannel:
    """Records each send's time and text; answers at once, like a platform with no latency."""

    name = "bench"

    def __init__(self, expected: int) -> None:
        self.sent: list[tuple[float, str]] = []
        self.expected = expected
        self.all_sent = asyncio.Event()

    def limits_for(self, chat: ChatRef) -> ChannelLimits:
        return ChannelLimits()

    async def run(self, inbox: Any) -> None:
        await asyncio.Event().wait()

    async def send(
        self,
        chat: ChatRef,
        content: OutboundContent,
        *,
        reply_to: str | None = None,
        final: bool = False,
        recipient: str | None = None,
    ) -> MessageHandle:
        self.sent.append((time.time(), content.text))
        if len(self.sent) >= self.expected:
            self.all_sent.set()
        return MessageHandle(chat, str(len(self.sent)))

    async def edit(
        self, handle: MessageHandle, content: OutboundContent, *, final: bool = False
    ) -> None:
        raise AssertionError("a scheduled text is never edited")


async def _no_inbox(message: Any) -> None:
    raise AssertionError("the benchmark schedules texts only")


def _rows(stored: int, rate: int, seconds: int, start: float) -> list[ScheduleRow]:
    due_now = rate * seconds
    rows = []
    for n in range(stored):
        # the due ones evenly over each second; the others days later (only the index sees them)
        due = start + n // rate + (n % rate) / rate if n < due_now else start + 86400 + n
        chat = json.dumps({"channel": "bench", "chat_id": f"c{n % 5000}"})
        rows.append(
            ScheduleRow(
                id=f"b{n:07d}",
                conversation_key=f"bench:c{n % 5000}",
                chat=chat,
                user_id=f"u{n % 5000}",
                kind="text",
                body=f"{due!r}",
                spec=f"at:{due}",
                timezone="UTC",
                missed="late",
                status="active",
                next_at=due,
                occurrence=0,
                fence=0,
                lease_until=None,
                sending=None,
                failures=0,
                note=None,
                language=None,
                created_at=start,
                fired_at=None,
            )  # fmt: skip
        )
    return rows


async def _store_rows(
    store: AnyStore, url: str | None, rows: list[ScheduleRow], *, fresh: bool = False
) -> None:
    """Many rows at once, straight into the tables the store made: storing is not what is
    measured (`add_schedule`'s limit checks cost 1-4 ms a row here)."""
    columns = [c.name for c in schedules.columns]
    records = [tuple(getattr(r, c) for c in columns) for r in rows]
    if url is None:
        assert isinstance(store, SqliteStore)
        marks = ", ".join("?" * len(columns))
        with sqlite3.connect(store.path) as db:
            db.executemany(
                f"INSERT INTO schedules ({', '.join(columns)}) VALUES ({marks})", records
            )
        return
    conn = await asyncpg.connect(url)
    try:
        if fresh:  # the benchmark's own database (see --url): the last run's rows go
            await conn.execute("DELETE FROM schedules")
        await conn.copy_records_to_table("schedules", records=records, columns=columns)
    finally:
        await conn.close()


async def bench(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="schedule-bench-"))
    store = build_store(folder / "bot.db", args.url)
    async with store:
        began = time.perf_counter()
        expected = args.rate * args.seconds
        # the later ones first: how fast rows are stored there sets when the due ones start
        await _store_rows(
            store,
            args.url,
            _rows(args.stored, args.rate, args.seconds, time.time())[expected:],
            fresh=True,
        )
        per_row = (time.perf_counter() - began) / max(args.stored - expected, 1)
        start = time.time() + 3.0 + 1.5 * per_row * expected
        await _store_rows(store, args.url, _rows(expected, args.rate, args.seconds, start))
        stored_s = time.perf_counter() - began
        assert time.time() < start, "storing took longer than foreseen; the window started late"
        channel = CountingChannel(expected)
        settings = SchedulesConfig(poll_s=args.poll, batch=args.batch, concurrency=args.concurrency)
        runner = ScheduleRunner(
            store, channels={"bench": channel}, inbox=_no_inbox, settings=settings, language="en"
        )
        await asyncio.sleep(max(0.0, start - time.time() - 0.5))
        task = asyncio.create_task(runner.run())
        cpu0, wall0 = time.process_time(), time.time()
        try:
            async with asyncio.timeout(start + args.seconds + 30 - time.time()):
                await channel.all_sent.wait()
        except TimeoutError:
            pass  # printed below: fewer fired than due
        cpu, wall = time.process_time() - cpu0, time.time() - wall0
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    delays = sorted(at - float(text) for at, text in channel.sent)
    fired = len(channel.sent)
    print(
        f"store: {'PostgreSQL' if args.url else 'SQLite'}, {args.stored} schedules stored in"
        f" {stored_s:.1f} s; due: {args.rate}/s for {args.seconds} s ({expected});"
        f" poll {args.poll} s, batch {args.batch}, concurrency {args.concurrency}"
    )
    print(f"fired: {fired} of {expected}, each once: {len({t for _, t in channel.sent}) == fired}")
    print(
        f"CPU per fired message: {cpu / max(fired, 1) * 1e6:.0f} µs ({cpu:.2f} s CPU in {wall:.1f} s)"
    )
    print(
        f"due -> send delay: p50 {ms(delays, 0.5)} ms, p99 {ms(delays, 0.99)} ms,"
        f" max {ms(delays, 1.0)} ms (goal: p99 <= 1000 ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stored", type=int, default=100_000)
    parser.add_argument("--rate", type=int, default=1000, help="schedules due per second")
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--poll", type=float, default=SchedulesConfig().poll_s)
    parser.add_argument("--batch", type=int, default=SchedulesConfig().batch)
    parser.add_argument("--concurrency", type=int, default=SchedulesConfig().concurrency)
    parser.add_argument(
        "--url",
        default=None,
        help="PostgreSQL (a database of its own: its schedules are deleted first)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(bench(args))


if __name__ == "__main__":
    main()
