"""asyncpg vs psycopg 3 on the gateway's own PostgreSQL statements: µs per call and client CPU.

Each driver runs the very SQL of `bot.storage.pg` (psycopg's placeholders rewritten), on a pool
of its own against the local server, in a database this script makes and drops:
claim an event, find the conversation's active session, create a turn, append a turn's two
messages (one transaction: lock the session, insert both), load a cached history (the usual
call: no new rows), load a cold one (50 rows), finish a turn; then whole turns (each of those
calls but the cold load) from 20 conversations at once, on a pool of 2 connections.
A third column runs the same calls through PostgresStore itself (asyncpg plus its own work:
the shielded task, the deadline, the history cache).

Why asyncpg: measured with `python bench/pg_bench.py` (2-core machine shared with other work,
PostgreSQL 15 on loopback, Python 3.11, asyncpg 0.32, psycopg 3.3.9 + psycopg-pool 3.3.3):

    op: µs wall / µs client CPU                asyncpg        psycopg 3    PostgresStore
    claim event                              598 / 124      1,431 / 284        794 / 227
    find the active session                   319 / 92      1,032 / 218        547 / 162
    create turn                              468 / 114      1,146 / 205        748 / 217
    append 2 messages (txn)                1,463 / 308      2,876 / 706      2,028 / 442
    load history, cached                      391 / 88        714 / 198        576 / 168
    load history, 50 rows                    673 / 153      1,186 / 321      1,331 / 414
    finish turn                              647 / 126        784 / 233        672 / 198
    whole turns, 20 conversations        4,018 / 1,003    9,058 / 2,513    5,843 / 1,475
    (median of 5 rounds of 500 calls; synchronous_commit off: no flush wait; pool of 2 per driver)

asyncpg takes 1.8-2.5x less client CPU on every call a turn makes (2.5x for a whole turn) and
answers sooner; the gateway's CPU is what a process runs out of first. PostgresStore adds
~30 µs a call over bare asyncpg (its shielded task, the deadline timer, rows as dicts; cProfile'd)
and the history cache's work on a cold load. With `--fsync` (each commit flushed, a real
server's default) a write waits 2.5-10 ms for this machine's shared disk, with either driver:
the flush, not the driver, then sets a write's latency (client CPU keeps the same order).

Settings are each driver's best for this use: asyncpg with a no-op pool reset (its default
reset is one more round trip per call), psycopg with autocommit connections (a plain
`pool.connection()` block opens a transaction, so a lone statement would cost BEGIN and COMMIT).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # runnable from a checkout

import asyncpg
import psycopg_pool

from agent.types import Message
from bot.storage.claims import _CLAIM
from bot.storage.messages import (
    _FIELDS,
    _HISTORY_SINCE,
    _TOUCH_SESSION,
    _insert_messages,
    message_fields,
)
from bot.storage.pg import PostgresStore
from bot.storage.query import Query
from bot.storage.schema import now
from bot.storage.sessions import _FIND_ACTIVE
from bot.storage.turns import _FINISH, _INSERT

MESSAGES = (Message("user", "a question, asked by a user"), Message("assistant", "an answer " * 20))
VALUES = {
    f"{field}_{i}": value
    for i, m in enumerate(MESSAGES)
    for field, value in zip(_FIELDS, message_fields(m), strict=True)
}
_INSERT_MESSAGES = _insert_messages(len(MESSAGES))
Op = Callable[[int], Awaitable[Any]]
SESSION_KEY = {
    "channel": "websocket",
    "conversation_key": "c",
    "user_id": "u",
    "agent_id": "default",
}
COLD = "load history, 50 rows"  # not part of a whole turn: a turn finds its history cached
CONVERSATIONS = 20
WHOLE = f"whole turns, {CONVERSATIONS} conversations"


def sql(query: Query) -> str:
    """The store's statement as PostgreSQL runs it (bot/storage/query.py)."""
    return query.sql("postgresql").text


def args(query: Query, **values: Any) -> tuple[Any, ...]:
    return query.args("postgresql", values)


def psycopg_sql(sql: str) -> str:
    """`$3` -> `%(p3)s`: named, since the store's statements use their parameters out of order."""
    return re.sub(r"\$(\d+)", r"%(p\1)s", sql)


def named(params: tuple[Any, ...]) -> dict[str, Any]:
    return {f"p{n}": value for n, value in enumerate(params, start=1)}


def touch(session_id: str, stamp: str) -> tuple[Any, ...]:
    return args(_TOUCH_SESSION, session_id=session_id, at=stamp)


def insert(session_id: str, turn_id: str, stamp: str) -> tuple[Any, ...]:
    values = {"session_id": session_id, "turn_id": turn_id, "created_at": stamp, **VALUES}
    return args(_INSERT_MESSAGES, **values)


class AsyncpgCalls:
    name = "asyncpg"

    def __init__(self, pool: asyncpg.Pool[asyncpg.Record]) -> None:
        self.pool = pool

    async def execute(self, sql: str, *params: Any) -> None:
        async with self.pool.acquire() as conn:
            await conn.execute(sql, *params)

    async def fetch(self, sql: str, *params: Any) -> list[Any]:
        async with self.pool.acquire() as conn:
            return list(await conn.fetch(sql, *params))

    async def append(self, session_id: str, turn_id: str) -> None:
        stamp = now()
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(sql(_TOUCH_SESSION), *touch(session_id, stamp))
            await conn.fetch(sql(_INSERT_MESSAGES), *insert(session_id, turn_id, stamp))


class PsycopgCalls:
    name = "psycopg 3"

    def __init__(self, pool: psycopg_pool.AsyncConnectionPool[Any]) -> None:
        self.pool = pool

    async def execute(self, sql: str, *params: Any) -> None:
        async with self.pool.connection() as conn:
            await conn.execute(psycopg_sql(sql), named(params))

    async def fetch(self, sql: str, *params: Any) -> list[Any]:
        async with self.pool.connection() as conn:
            cursor = await conn.execute(psycopg_sql(sql), named(params))
            rows: list[Any] = await cursor.fetchall()
            return rows

    async def append(self, session_id: str, turn_id: str) -> None:
        stamp = now()
        async with self.pool.connection() as conn, conn.transaction():
            touched = named(touch(session_id, stamp))
            await conn.execute(psycopg_sql(sql(_TOUCH_SESSION)), touched)
            params = named(insert(session_id, turn_id, stamp))
            await (await conn.execute(psycopg_sql(sql(_INSERT_MESSAGES)), params)).fetchall()


def driver_ops(calls: AsyncpgCalls | PsycopgCalls, session_id: str, full: str) -> dict[str, Op]:
    run = uuid.uuid4().hex[:8]

    def turn(n: int) -> dict[str, Any]:
        return {
            "id": f"{run}-t{n}", "session_id": session_id, "channel": "websocket",
            "conversation_key": "c", "inbound_event_ids": "[]", "placeholder": None,
            "status": "running", "created_at": now(), "inbound_messages": None,
        }  # fmt: skip

    def finish(n: int) -> dict[str, Any]:
        return {
            "turn_id": f"{run}-t{n}", "status": "completed", "final_text": "an answer",
            "error": None, "finished_at": now(),
        }  # fmt: skip

    return {
        "claim event": lambda n: calls.execute(
            sql(_CLAIM), *args(_CLAIM, event_id=f"{run}-e{n}", ttl_s=600.0)
        ),
        "find the active session": lambda n: calls.fetch(
            sql(_FIND_ACTIVE), *args(_FIND_ACTIVE, **SESSION_KEY)
        ),
        "create turn": lambda n: calls.execute(sql(_INSERT), *args(_INSERT, **turn(n))),
        "append 2 messages (txn)": lambda n: calls.append(session_id, f"{run}-t{n}"),
        "load history, cached": lambda n: calls.fetch(
            sql(_HISTORY_SINCE), *args(_HISTORY_SINCE, session_id=full, since=1 << 60)
        ),
        COLD: lambda n: calls.fetch(
            sql(_HISTORY_SINCE), *args(_HISTORY_SINCE, session_id=full, since=0)
        ),
        "finish turn": lambda n: calls.execute(sql(_FINISH), *args(_FINISH, **finish(n))),
    }


def store_ops(store: PostgresStore, session_id: str, full: str) -> dict[str, Op]:
    run = uuid.uuid4().hex[:8]

    async def cold(n: int) -> Any:
        store._histories.forget(full)
        return await store.load_history(full)

    return {
        "claim event": lambda n: store.claim_event(f"{run}-e{n}", 600.0),
        "find the active session": lambda n: store.active_session(
            channel="websocket", conversation_key="c", user_id="u"
        ),
        "create turn": lambda n: store.create_turn(
            turn_id=f"{run}-t{n}",
            session_id=session_id,
            channel="websocket",
            conversation_key="c",
            inbound_event_ids=[],
            placeholder=None,
        ),  # fmt: skip
        "append 2 messages (txn)": lambda n: store.append_messages(
            session_id, f"{run}-t{n}", MESSAGES
        ),
        "load history, cached": lambda n: store.load_history(full),
        COLD: cold,
        "finish turn": lambda n: store.finish_turn(f"{run}-t{n}", status="completed"),
    }


async def timed(op: Op, calls: int, first: int) -> tuple[float, float]:
    """(wall µs, process CPU µs) per call over `calls` calls, one at a time."""
    wall, cpu = time.perf_counter(), time.process_time()
    for n in range(calls):
        await op(first + n)
    return (time.perf_counter() - wall) / calls * 1e6, (time.process_time() - cpu) / calls * 1e6


async def whole_turns(ops: dict[str, Op], turns: int, first: int) -> tuple[float, float]:
    """Whole turns (every op but the cold load) from CONVERSATIONS tasks at once: µs wall and
    CPU per turn."""
    sequence = [op for name, op in ops.items() if name != COLD]

    async def conversation(c: int) -> None:
        for n in range(turns // CONVERSATIONS):
            for op in sequence:
                await op(first + c * 100_000 + n)

    wall, cpu = time.perf_counter(), time.process_time()
    async with asyncio.TaskGroup() as group:
        for c in range(CONVERSATIONS):
            group.create_task(conversation(c))
    return (time.perf_counter() - wall) / turns * 1e6, (time.process_time() - cpu) / turns * 1e6


async def seed(url: str) -> tuple[str, str]:
    """A session to write to, and one with 50 messages to read."""
    async with PostgresStore(url) as store:
        key = {"channel": "websocket", "user_id": "u"}
        session_id = await store.active_session(conversation_key="c", **key)
        full = await store.active_session(conversation_key="full", **key)
        for n in range(25):
            await store.append_messages(full, f"seed-{n}", MESSAGES)
    return session_id, full


async def run(server: str, calls: int, rounds: int, turns: int, fsync: bool) -> None:
    name = f"gw_bench_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(f"{server}/postgres")
    await admin.execute(f"CREATE DATABASE {name}")
    if not fsync:  # measure the drivers, not the disk's flush (2.5-10 ms a commit here)
        await admin.execute(f"ALTER DATABASE {name} SET synchronous_commit = off")
    url = f"{server}/{name}"
    samples: dict[str, dict[str, list[tuple[float, float]]]] = {}
    try:
        session_id, full = await seed(url)
        async with (
            asyncpg.create_pool(url, min_size=2, max_size=2, reset=_no_reset) as apool,
            psycopg_pool.AsyncConnectionPool(
                url, min_size=2, max_size=2, kwargs={"autocommit": True}, open=False
            ) as ppool,
            PostgresStore(url, pool_size=2) as store,
        ):
            drivers = {
                "asyncpg": driver_ops(AsyncpgCalls(apool), session_id, full),
                "psycopg 3": driver_ops(PsycopgCalls(ppool), session_id, full),
                "PostgresStore": store_ops(store, session_id, full),
            }
            for ops in drivers.values():  # warm: connections, prepared statements
                for op in ops.values():
                    for n in range(20):
                        await op(-n - 1)
            # rounds alternate between the drivers, so a busy moment of the machine hits all
            for r in range(rounds):
                for driver, ops in drivers.items():
                    got = samples.setdefault(driver, {})
                    for label, op in ops.items():
                        got.setdefault(label, []).append(await timed(op, calls, r * calls))
                    turn = await whole_turns(ops, turns // rounds, 10_000_000 + r * 1000)
                    got.setdefault(WHOLE, []).append(turn)
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.close()
    print(f"{'op: µs wall / µs client CPU':33}" + "".join(f"{d:>17}" for d in samples))
    for label in samples["asyncpg"]:
        cells = ""
        for got in samples.values():
            wall = statistics.median(w for w, _ in got[label])
            cpu = statistics.median(c for _, c in got[label])
            cells += f"{f'{wall:,.0f} / {cpu:,.0f}':>17}"
        print(f"{label:33}{cells}")
    flush = "each commit flushed" if fsync else "synchronous_commit off: no flush wait"
    print(f"(median of {rounds} rounds of {calls} calls; {flush}; pool of 2 per driver)")


async def _no_reset(conn: asyncpg.Connection[asyncpg.Record]) -> None:
    """As PostgresStore: nothing to reset (see bot/storage/pg/connection.py)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--fsync", action="store_true", help="keep synchronous_commit on")
    args = parser.parse_args()
    asyncio.run(run(args.server, args.calls, args.rounds, args.turns, args.fsync))


if __name__ == "__main__":
    main()
