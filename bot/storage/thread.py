"""The store's thread: one SQLite connection on one worker thread, fed a queue of jobs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

from sqlite_utils import Database

from bot.storage.schema import MIGRATIONS, migrate, now

log = logging.getLogger(__name__)

T = TypeVar("T")


def _dicts(cursor: sqlite3.Cursor) -> list[dict[str, Any]]:
    keys = [d[0] for d in cursor.description]
    return [dict(zip(keys, row, strict=True)) for row in cursor]


def _settle(outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    for future, result, exc in outcomes:
        if future.cancelled():
            continue
        if exc is None:
            future.set_result(result)
        else:
            future.set_exception(exc)


class StoreThread:
    """Opens, migrates and closes the database, and runs jobs on the thread that owns it.

    Coroutines hand work to a single-worker executor with `_run`: the connection (and whatever
    a subclass caches beside it) lives on that thread alone, so nothing needs a lock. Calls
    queue up and one executor job runs all that are waiting, in order, each in its own
    transaction, then wakes the loop once for the lot: a thread hop costs more than a write.
    """

    _conn: sqlite3.Connection  # set and used on the store thread only

    def __init__(self, path: str | Path) -> None:
        self.path = path
        self.thread_ident: int | None = None  # the thread that owns the connection, once open
        self._executor: ThreadPoolExecutor | None = None
        self._jobs: deque[tuple[asyncio.Future[Any], Callable[..., Any], tuple[Any, ...]]] = deque()
        self._drain_queued = False  # set on the loop, cleared by the store thread

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

    async def open(self) -> None:
        if self._executor is not None:
            raise RuntimeError(f"store {str(self.path)!r} is already open")
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-store")
        try:
            applied = await self._run(self._open_db)
        except BaseException:  # includes cancellation, after which _open_db may yet succeed
            self._executor.submit(self._close_db)
            self._executor.shutdown(wait=False)
            self._executor = None
            raise
        log.info("storage %s open, schema v%d (applied %s)", self.path, len(MIGRATIONS), applied)

    async def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is None:
            return
        try:
            await asyncio.get_running_loop().run_in_executor(executor, self._close_db)
        finally:
            executor.shutdown(wait=True)  # idle by now: only joins the thread

    # -- loop side -----------------------------------------------------------------------
    def _run(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        if self._executor is None:
            raise RuntimeError(
                f"store {str(self.path)!r} is not open; await store.open() or use `async with`"
            )
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.append((future, fn, args))
        # A drain that is queued but not started will see this job: it clears the flag before
        # it looks at the deque. Otherwise queue one; at worst it finds the deque empty.
        if not self._drain_queued:
            self._drain_queued = True
            self._executor.submit(self._drain, loop)
        return future

    async def _one(self, sql: str, key: str) -> dict[str, Any] | None:
        rows = await self._run(self._select, sql, key)
        return rows[0] if rows else None

    # -- everything below runs on the store thread only ----------------------------------
    def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        """Run every waiting job, then settle their futures in one loop callback.

        A job runs even if its caller was cancelled meanwhile, so a write is never half-known:
        it lands, and the cancelled caller just does not hear about it.
        """
        self._drain_queued = False
        outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]] = []
        # only the jobs here now: later ones queue their own drain, so no caller waits on an
        # endless stream of newer work before hearing back
        for _ in range(len(self._jobs)):
            future, fn, args = self._jobs.popleft()
            try:
                outcomes.append((future, fn(*args), None))
            except BaseException as exc:  # each outcome goes to its own caller, who re-raises
                outcomes.append((future, None, exc))
        if outcomes:
            loop.call_soon_threadsafe(_settle, outcomes)

    def _open_db(self) -> list[int]:
        memory = str(self.path) == ":memory:"
        if not memory:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        # autocommit: each lone statement is its own short transaction; batches use BEGIN
        conn = sqlite3.connect(str(self.path), isolation_level=None)
        try:
            db = Database(conn, recursive_triggers=False, execute_plugins=False)
            conn.execute("PRAGMA busy_timeout = 5000")  # other processes may share the file
            if not memory:
                db.enable_wal()
            conn.execute("PRAGMA synchronous = NORMAL")  # WAL makes this crash-safe
            applied = migrate(db)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self.thread_ident = threading.get_ident()
        return applied

    def _close_db(self) -> None:
        conn: sqlite3.Connection | None = vars(self).pop("_conn", None)
        if conn is not None:
            conn.execute("PRAGMA optimize")
            conn.close()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")  # IMMEDIATE: read-then-write must not deadlock on upgrade
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _select(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        return _dicts(self._conn.execute(sql, params))

    def _insert(self, sql: str, row: tuple[Any, ...]) -> None:
        self._conn.execute(sql, (*row, now()))

    def _update(self, sql: str, params: tuple[Any, ...], what: str) -> None:
        if self._conn.execute(sql, params).rowcount == 0:
            raise LookupError(f"no {what} with id {params[-1]!r}; create it first")
