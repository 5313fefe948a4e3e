"""The PostgreSQL store's pool: each call one short transaction, a deadline, faults as StorageError.

The driver is asyncpg, chosen by measurement (bench/pg_bench.py runs the gateway's own
statements on both; its docstring has the figures): against psycopg 3 it takes 1.8-2.5x less
client CPU on every call a turn makes (1.0 vs 2.5 ms per whole turn) and answers sooner. Its
pool also drops a connection whose server went away instead of handing it out again (psycopg's
needs a `check`, one more round trip per call), and its connect has a deadline by default.

Settings, and why:
- `reset=`: asyncpg's pool sends `SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *;
  RESET ALL` on every release, one more round trip per call. The store never changes session
  state (its advisory locks are transaction-scoped), so only the ROLLBACK of an interrupted
  transaction is needed, which asyncpg does before calling our reset.
- one deadline (`call_timeout_s`) covers waiting for a pooled connection and the statements;
  when it passes, the connection's socket is closed (`_before` says why not a plain timeout).
  Connecting has its own (`connect_timeout_s`; asyncpg's default is 60 s).
- a call runs as its own task, shielded: a caller cancelled mid-call (`/stop`, a turn deadline)
  does not cut a write in half or leave its outcome unknown; the write finishes or fails alone,
  as on SQLite, where every call runs to its end.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Self, TypeVar

import asyncpg

from bot.storage.base import StorageError
from bot.storage.faults import Trouble
from bot.storage.pg.faults import LINK_FAULTS, describe, is_fault, redacted
from bot.storage.pg.schema import MIGRATIONS, migrate
from bot.storage.query import Dialect, Query
from bot.storage.tx import Op, Row, StoreCalls, Transaction, Values

if TYPE_CHECKING:
    from bot.storage.pg.conn import Conn

log = logging.getLogger(__name__)

T = TypeVar("T")
P = ParamSpec("P")
CONNECT_TIMEOUT_S = 5.0
CALL_TIMEOUT_S = 10.0
POOL_SIZE = 10


async def _no_reset(conn: Conn) -> None:
    """Nothing to undo: see the module docstring (asyncpg rolls back an open transaction first)."""


class PgConnection(StoreCalls):
    """Opens (and migrates) the pool, runs each call with a deadline, closes it."""

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = POOL_SIZE,
        call_timeout_s: float = CALL_TIMEOUT_S,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
    ) -> None:
        self.url = url
        self.pool_size = pool_size
        self.call_timeout_s = call_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self._pool: asyncpg.Pool[asyncpg.Record] | None = None
        self._calls: set[asyncio.Task[Any]] = set()
        self._trouble = Trouble()
        self._link_down = False

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def __str__(self) -> str:
        return redacted(self.url)

    async def open(self) -> None:
        if self._pool is not None:
            raise RuntimeError(f"store {self} is already open")
        pool: asyncpg.Pool[asyncpg.Record] | None = None
        try:
            async with asyncio.timeout(self.connect_timeout_s + self.call_timeout_s):
                pool = await asyncpg.create_pool(
                    self.url,
                    min_size=1,
                    max_size=self.pool_size,
                    timeout=self.connect_timeout_s,
                    reset=_no_reset,
                )
                async with pool.acquire() as conn:
                    applied = await migrate(conn)
        except BaseException as exc:
            if pool is not None:
                pool.terminate()
            if not (is_fault(exc) or isinstance(exc, ValueError)):  # ValueError: a bad url
                raise
            raise StorageError(f"cannot open the database {self}: {describe(exc)}") from exc
        self._pool = pool
        log.info("storage %s open, schema v%d (applied %s)", self, len(MIGRATIONS), applied)

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if self._calls:
            await asyncio.wait(self._calls)  # shielded writes of cancelled callers finish
        try:
            await asyncio.wait_for(pool.close(), self.call_timeout_s)
        except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
            pool.terminate()
            log.warning("storage %s closed untidily", self)
        self._closed()

    @property
    def trouble(self) -> str | None:
        """The newest storage failure of a kind of call that has not succeeded since."""
        return self._trouble.message

    # -- calls ---------------------------------------------------------------------------
    async def _run(
        self,
        fn: Callable[Concatenate[Conn, P], Awaitable[T]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """`fn(conn, ...)` on a pooled connection, to its end even if the caller is cancelled."""
        if self._pool is None:
            raise RuntimeError(f"store {self} is not open; await store.open() or use `async with`")
        task = asyncio.create_task(self._call(self._pool, fn, *args, **kwargs))
        self._calls.add(task)
        task.add_done_callback(self._done)
        return await asyncio.shield(task)

    async def _tx(self, op: Op[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`op` (written once for both backends) on a pooled connection, as `_run` runs a call."""

        async def call(conn: Conn) -> T:
            return await op(PgTx(conn), *args, **kwargs)

        call.__name__ = op.__name__  # the kind of call, for `trouble`
        return await self._run(call)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._calls.discard(task)
        if not task.cancelled():
            task.exception()  # a caller that went away still has it read (and raised to it)

    async def _call(
        self,
        pool: asyncpg.Pool[asyncpg.Record],
        fn: Callable[Concatenate[Conn, P], Awaitable[T]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.call_timeout_s
        try:
            async with asyncio.timeout_at(deadline):
                conn = await pool.acquire()
            result = await _before(deadline, pool, conn, fn(conn, *args, **kwargs))
        except Exception as exc:
            if not is_fault(exc):
                raise
            self._trouble.failed(fn, exc, None)
            self._link_down = self._link_down or isinstance(exc, LINK_FAULTS)
            raise StorageError(f"storage {self} failed: {describe(exc)}") from exc
        if self._link_down:  # back: what failed while it was down is no longer failing
            self._link_down, self._trouble = False, Trouble()
        elif self._trouble:
            self._trouble.succeeded(fn, None)  # a server fault (a full disk) clears by kind
        return result


async def _before(
    deadline: float,
    pool: asyncpg.Pool[asyncpg.Record],
    conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record],
    work: Awaitable[T],
) -> T:
    """`work` on `conn`, or TimeoutError at the deadline; then the connection goes back to the pool.

    Not `asyncio.timeout`: on a silent (half-open) link asyncpg answers a cancellation with a
    cancel request over a new connection and waits for it, at ROLLBACK and at release, with no
    deadline (seen here: still waiting after 60 s). Closing the socket ends every wait at once.
    """
    expired = False

    def expire() -> None:
        nonlocal expired
        expired = True
        conn.terminate()

    timer = asyncio.get_running_loop().call_at(deadline, expire)
    try:
        return await work
    except Exception as exc:
        if expired:
            raise TimeoutError from exc
        raise
    finally:
        timer.cancel()
        await pool.release(conn)  # a terminated one is dropped (and replaced on a later acquire)


def rowcount(status: str) -> int:
    """The row count of a command tag: 'UPDATE 3' -> 3, 'INSERT 0 1' -> 1."""
    return int(status.rpartition(" ")[2])


# one at a time per key, until the transaction ends (the key's parts joined by chr(31))
_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended($1::text, 0))"


class PgTx:
    """`bot.storage.tx.Tx` on a pooled asyncpg connection."""

    __slots__ = ("conn",)
    dialect: Dialect = "postgresql"

    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    async def fetch(self, query: Query, values: Values | None = None, /, **named: Any) -> list[Row]:
        sql = query.postgresql or query.sql("postgresql")
        return list(await self.conn.fetch(sql.text, *sql.bind(values, named)))

    async def fetchone(
        self, query: Query, values: Values | None = None, /, **named: Any
    ) -> Row | None:
        sql = query.postgresql or query.sql("postgresql")
        row: Row | None = await self.conn.fetchrow(sql.text, *sql.bind(values, named))
        return row

    async def execute(self, query: Query, values: Values | None = None, /, **named: Any) -> int:
        sql = query.postgresql or query.sql("postgresql")
        return rowcount(await self.conn.execute(sql.text, *sql.bind(values, named)))

    async def insert_ids(
        self, query: Query, values: Values | None = None, /, **named: Any
    ) -> list[int]:
        sql = query.postgresql or query.sql("postgresql")
        rows = await self.conn.fetch(sql.text, *sql.bind(values, named))  # RETURNING the new ids
        return sorted(row[0] for row in rows)  # taken in VALUES order

    def transaction(self) -> Transaction:
        return self.conn.transaction()

    async def lock(self, *key: str) -> None:
        await self.conn.execute(_LOCK, "\x1f".join(key))
