"""Storage faults: a lock another process holds is waited for off the loop; failures are noted.

A call on the loop waits for another process's write lock only ON_LOOP_BUSY_MS; then it goes to
`LockWaiter`'s thread, which waits up to `busy_wait_s` in all while the loop serves every other
conversation. Calls made while one waits there queue behind it on that thread, so the
connection is never used by two threads at once and calls keep their order. `Trouble` keeps the
failures `/healthz` reports.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
ON_LOOP_BUSY_MS = 5  # a locked database stalls the loop this long at most, then a thread waits
BUSY_WAIT_S = 5.0  # how long a call waits in all for another process's lock before failing
# errors of the caller's data or our code: the storage itself is fine
NOT_FAULTS = (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError)


def is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF  # the primary code of an extended one
    return code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


class LockWaiter:
    """Runs calls that met a lock on a thread of its own, one at a time, in order."""

    def __init__(self) -> None:
        self._thread: ThreadPoolExecutor | None = None
        self._calls: list[Future[Any]] = []  # submitted, not yet done
        self.waiting = False  # whether `_calls` may hold calls (`idle` looks closer)

    @property
    def idle(self) -> bool:
        """No call is waiting on the thread: the loop may use the connection."""
        if self._calls:
            self._calls = [call for call in self._calls if not call.done()]
        self.waiting = bool(self._calls)
        return not self._calls

    async def run(
        self, conn: sqlite3.Connection, wait_s: float, fn: Callable[..., T], args: tuple[Any, ...]
    ) -> T:
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="sqlite-busy")
        deadline = time.monotonic() + wait_s
        call = self._thread.submit(_call_waiting, conn, deadline, fn, args)
        self._calls.append(call)
        self.waiting = True
        return await asyncio.wrap_future(call)

    async def close(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            await asyncio.wrap_future(thread.submit(lambda: None))  # after the calls queued there
            thread.shutdown()


def _call_waiting(
    conn: sqlite3.Connection, deadline: float, fn: Callable[..., T], args: tuple[Any, ...]
) -> T:
    left_ms = max(0, round((deadline - time.monotonic()) * 1000))
    conn.execute(f"PRAGMA busy_timeout = {left_ms}")
    try:
        return fn(*args)
    finally:
        conn.execute(f"PRAGMA busy_timeout = {ON_LOOP_BUSY_MS}")


class Trouble:
    """Storage failures by kind of call, until that kind or any insert succeeds again.

    Not until any call succeeds: on a full disk, reads and deletes still work.
    """

    def __init__(self) -> None:
        # kind of call -> its failure, newest last (empty: no trouble; read on every call)
        self.failing: dict[str, str] = {}
        self._rowid_at_failure: int | None = None

    @property
    def message(self) -> str | None:
        return next(reversed(self.failing.values()), None)

    def __bool__(self) -> bool:
        return bool(self.failing)

    def failed(self, fn: Callable[..., Any], exc: Exception, rowid: int | None) -> None:
        self.failing.pop(_kind(fn), None)
        self.failing[_kind(fn)] = f"{type(exc).__name__}: {exc}"
        if rowid is not None:
            self._rowid_at_failure = rowid

    def succeeded(self, fn: Callable[..., Any], rowid: int | None) -> None:
        """`rowid`: the connection's last insert rowid now (None when it cannot be read)."""
        if rowid is not None and rowid != self._rowid_at_failure:
            self.failing.clear()  # an insert succeeded since: there is room again
        else:
            self.failing.pop(_kind(fn), None)


def _kind(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__name__", "")
