"""The store's connection: short SQLite transactions on the event loop, checkpoints on a thread.

Why not a store thread: measured at 700 turns/s, a job handed to a worker thread waited for the
GIL behind the busy loop (Python switches threads every 5 ms), so a write that takes 50 µs came
back after 10–40 ms and turn latency p99 went past 50 ms. A WAL write with synchronous=NORMAL
does no fsync, so running it right on the loop is cheaper than any hop. What can take long is
the WAL checkpoint (it writes pages back and fsyncs): automatic checkpoints are off on this
connection, and a second connection on its own thread runs PASSIVE checkpoints, which never
block our writers.

Another process holding the write lock is the other thing that takes long: that wait happens
off the loop (`bot.storage.faults`). A call that fails raises `StorageError`, kept in `trouble`.
"""

from __future__ import annotations

import asyncio
import logging
import random
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn, Self, TypeVar

from sqlite_utils import Database

from bot.storage.base import StorageError
from bot.storage.faults import (
    BUSY_WAIT_S,
    NOT_FAULTS,
    ON_LOOP_BUSY_MS,
    LockWaiter,
    Trouble,
    is_busy,
)
from bot.storage.schema import MIGRATIONS, migrate
from bot.storage.tx import Op, P, SqliteTx, StoreCalls, driver
from bot.storage.wal import read_wal_back

log = logging.getLogger(__name__)

T = TypeVar("T")
# A None bound to a statement is "adapted" by sqlite3: a lookup that fails, then `__adapt__` and
# `__conform__` looked up and not found, each raising and clearing an AttributeError: ~2.5k
# instructions per None, and a message row binds six. An adapter for None found at once, in C
# (`object.__init__(None)` is None), makes it ~0.2k. It binds NULL, as before.
sqlite3.register_adapter(type(None), object.__init__)
CHECKPOINT_EVERY = 500  # writes between checkpoints (~1000 WAL pages is SQLite's own default)
# Past this many frames after a checkpoint, the WAL is restarted (see `_checkpoint_wal`); a
# restarted WAL larger than WAL_KEEP_BYTES is cut back to that size by the next commit.
RESTART_AT_FRAMES = 8192  # ~32 MB of 4 KiB pages
WAL_KEEP_BYTES = 64 * 1024 * 1024
# How long a RESTART waits for a writer or a reader (another process's long read, say) before it
# gives up for this round: it holds the write lock meanwhile, and every write waits with it.
RESTART_WAIT_S = 0.1
OPEN_BUSY_MS = 2000  # at start nothing else is served yet: waiting on the loop is fine
OPEN_DEADLINE_S = 30.0  # for another process creating or migrating the schema meanwhile


def _prepare(conn: sqlite3.Connection, db: Database, *, wal: bool) -> list[int]:
    """WAL and the schema, tried again while another process does the same (two processes
    started together on a new file): SQLite answers "database is locked" at once, without
    waiting, where a wait could deadlock (a read turning into a write, the switch to WAL). Each
    step is idempotent (a migration looks again under its lock), so trying again is safe."""
    deadline = time.monotonic() + OPEN_DEADLINE_S
    while True:
        try:
            if wal:
                db.enable_wal()
                conn.execute("PRAGMA wal_autocheckpoint = 0")  # the checkpoint thread does it
            conn.execute("PRAGMA synchronous = NORMAL")  # WAL makes this crash-safe
            conn.execute(f"PRAGMA journal_size_limit = {WAL_KEEP_BYTES}")
            return migrate(db)
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() > deadline:
                raise
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            time.sleep(random.uniform(0.01, 0.05))  # at start: nothing else is served yet


class StoreConnection(StoreCalls):
    """Opens, migrates and closes the database; runs each call as one short transaction."""

    _conn: sqlite3.Connection
    _on_conn: SqliteTx
    interleaves = False  # each call runs to its end on the loop

    def __init__(self, path: str | Path) -> None:
        self.path = path
        self.checkpoints = 0  # how many checkpoints ran (for tests and logs)
        self._open = False
        self._writes = 0
        self._checkpointer: ThreadPoolExecutor | None = None
        self._checkpoint: Future[None] | None = None
        self._checkpoint_conn: sqlite3.Connection | None = None  # used on that thread only
        self._restarting = False  # the checkpoint thread holds the write lock: calls wait
        self._restart_over: asyncio.Future[None] | None = None  # what calls wait for meanwhile
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop the calls run on
        self.restarts = 0  # how many times the WAL was restarted (for tests and logs)
        self.busy_wait_s = BUSY_WAIT_S  # for another process's lock, per call
        self._waiter = LockWaiter()
        self._trouble = Trouble()

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

    @property
    def on_disk(self) -> bool:
        return str(self.path) != ":memory:"

    async def open(self) -> None:
        if self._open:
            raise RuntimeError(f"store {str(self.path)!r} is already open")
        try:
            applied = self._open_db()
        except (OSError, sqlite3.Error) as exc:
            raise StorageError(f"cannot open the database {str(self.path)!r}: {exc}") from exc
        self._open = True
        self._loop = asyncio.get_running_loop()
        if self.on_disk:
            self._checkpointer = ThreadPoolExecutor(1, thread_name_prefix="sqlite-checkpoint")
        log.info("storage %s open, schema v%d (applied %s)", self.path, len(MIGRATIONS), applied)

    async def close(self) -> None:
        if not self._open:
            return
        self._open = False
        await self._waiter.close()
        checkpointer, self._checkpointer = self._checkpointer, None
        if checkpointer is not None:
            await asyncio.wrap_future(checkpointer.submit(self._close_checkpoint_conn))
            checkpointer.shutdown()  # idle by now: only joins the thread
        self._close_db()

    # -- calls ---------------------------------------------------------------------------
    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn` now, on the loop: each store method is one statement or one transaction."""
        self._check_open()
        if not self._waiter.idle:
            result = await self._wait_for_lock(fn, args)  # in order, behind the waiting call
        else:
            try:
                result = fn(*args)
            except sqlite3.Error as exc:
                if not is_busy(exc):
                    self._raise(exc, fn)
                result = await self._wait_for_lock(fn, args)
        self._ran(fn)
        return result

    async def _tx(self, op: Op[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`op` (written once for both backends) on this connection, as `_run` runs a call;
        the usual case inline (the store's every call comes this way: no layer it can spare).
        Awaited, not `run_now`: it never suspends, and an await returns without an exception."""
        # `waiting` and `failing`, not `idle`'s pruning nor `_ran`: each layer of Python costs
        # this call ~1-2k instructions, and a turn makes six of them
        if self._open and not self._waiter.waiting and not self._restarting:
            try:
                result = await op(self._on_conn, *args, **kwargs)
            except sqlite3.Error as exc:
                if not is_busy(exc):
                    self._raise(exc, op)
                return await self._off_loop(op, args, kwargs)
            if self._trouble.failing:
                self._trouble.succeeded(op, self._last_rowid())
            self._writes += 1
            if self._writes >= CHECKPOINT_EVERY:
                self._request_checkpoint()
            return result
        if self._open and self._restarting:  # a write would wait for the restart: not here
            await self._after_restart()
            return await self._tx(op, *args, **kwargs)
        if self._open and self._waiter.idle:  # the calls that waited are done: prune, go on
            return await self._tx(op, *args, **kwargs)
        self._check_open()
        return await self._run(driver(op), self._on_conn, args, kwargs)

    async def _after_restart(self) -> None:
        """Wait, the loop serving other work meanwhile, until the checkpoint thread's RESTART
        and the write after it are done (a few ms); the calls that waited then run in the order
        they came. Handed to the lock waiter's thread instead, a call waited for the GIL behind
        the busy loop (see the module's docstring) and could take the lock before the checkpoint
        thread's write, and start the WAL over itself (its fdatasync)."""
        if self._restart_over is None or self._restart_over.done():
            self._restart_over = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._restart_over)

    def _restart_ended(self) -> None:
        """On the loop, after the checkpoint thread cleared `_restarting`: the calls go on."""
        if self._restart_over is not None and not self._restart_over.done():
            self._restart_over.set_result(None)

    async def _off_loop(self, op: Op[P, T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
        """`op` on the lock waiter's thread, behind any call waiting there (see bot.storage.faults)."""
        result = await self._wait_for_lock(driver(op), (self._on_conn, args, kwargs))
        self._ran(op)
        return result

    def _check_open(self) -> None:
        if not self._open:
            raise RuntimeError(
                f"store {str(self.path)!r} is not open; await store.open() or use `async with`"
            )

    def _ran(self, fn: Callable[..., Any]) -> None:
        """After a call that succeeded: its kind is no longer failing; a checkpoint when due."""
        if self._trouble:
            self._trouble.succeeded(fn, self._last_rowid())
        self._writes += 1
        if self._writes >= CHECKPOINT_EVERY:
            self._request_checkpoint()

    async def _wait_for_lock(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        try:
            return await self._waiter.run(self._conn, self.busy_wait_s, fn, args)
        except sqlite3.Error as exc:
            self._raise(exc, fn)

    @property
    def trouble(self) -> str | None:
        """The newest storage failure of a kind of call that has not succeeded since."""
        return self._trouble.message

    def _last_rowid(self) -> int | None:
        if not self._waiter.idle:
            return None  # the connection is in use on the waiting thread
        try:
            return int(self._conn.execute("SELECT last_insert_rowid()").fetchone()[0])
        except sqlite3.Error:
            return None  # the failure itself is reported, not this

    def _raise(self, exc: sqlite3.Error, fn: Callable[..., Any]) -> NoReturn:
        """A storage fault as a `StorageError`, noted in `trouble`; any other error as it is."""
        if isinstance(exc, NOT_FAULTS):
            raise exc
        self._trouble.failed(fn, exc, self._last_rowid())
        raise StorageError(f"storage {str(self.path)!r} failed: {exc}") from exc

    def _request_checkpoint(self) -> None:
        if self._checkpointer is None or (self._checkpoint and not self._checkpoint.done()):
            return
        self._writes = 0
        self._checkpoint = self._checkpointer.submit(self._checkpoint_wal)

    def _checkpoint_wal(self) -> None:
        """On the checkpoint thread, with a connection of its own (opened once, kept).

        A PASSIVE checkpoint never blocks a writer, but it copies only the frames written
        before it began, and a WAL starts again from its beginning only when a write finds all
        of it copied. Under a steady load the loop writes during every checkpoint, so that never
        happened: the WAL grew by every page every turn wrote (~100 KB a turn, 1 GB in 10,000
        turns flat out, its index slower to search with each frame). So when a checkpoint leaves
        more than RESTART_AT_FRAMES behind it, a RESTART follows: it holds the write lock while
        it copies what the PASSIVE one missed (a few hundred frames) and waits for readers to
        leave the WAL (~2-3 ms in all), and the write after it starts the WAL over
        (`_start_wal_over`). Meanwhile this process's calls wait for both, so the loop does not
        sleep in SQLite's busy handler (`_tx`, `_after_restart`)."""
        if self._checkpoint_conn is None:
            # its busy timeout is only the RESTART's: a PASSIVE checkpoint never waits
            self._checkpoint_conn = sqlite3.connect(str(self.path), timeout=RESTART_WAIT_S)
            self._checkpoint_conn.execute(f"PRAGMA journal_size_limit = {WAL_KEEP_BYTES}")
            # its one write (`_start_wal_over`) syncs as the loop's would: not again at commit
            self._checkpoint_conn.execute("PRAGMA synchronous = NORMAL")
        try:
            _, frames, copied = self._checkpoint_conn.execute(
                "PRAGMA wal_checkpoint(PASSIVE)"
            ).fetchone()
            self.checkpoints += 1
            if frames > RESTART_AT_FRAMES or 0 < copied == frames:  # it starts over next
                read_wal_back(self.path)
            if frames > RESTART_AT_FRAMES:
                self._restarting = True
                try:
                    if self._loop_moved_on():
                        row = self._checkpoint_conn.execute("PRAGMA wal_checkpoint(RESTART)")
                        if row.fetchone()[0] == 0:  # 1: a reader or writer held on past the wait
                            self.restarts += 1
                            self._start_wal_over()
                finally:
                    self._restarting = False
                    self._call_loop(self._restart_ended)
        except sqlite3.Error as exc:
            log.warning("WAL checkpoint of %s failed: %s", self.path, exc)

    def _start_wal_over(self) -> None:
        """On the checkpoint thread, after a RESTART: make the write that starts the WAL over.

        That write syncs the WAL (SQLite, synchronous=NORMAL: "the WAL file header is
        synchronized when a WAL file begins to be reused after a checkpoint": an fdatasync,
        perf counted one a restart) and cuts it back to WAL_KEEP_BYTES. It was the first write
        after the RESTART: the loop's (an fsync on the loop, under load the ext4 journal's
        wait with it: the stall watch found 9-18 ms pauses in the loop's writes) or a call's
        handed to the lock waiter's thread meanwhile. The loop's writes now wait for it
        (`_after_restart`). A write that changes nothing: user_version set to itself."""
        assert self._checkpoint_conn is not None
        try:
            version = int(self._checkpoint_conn.execute("PRAGMA user_version").fetchone()[0])
            self._checkpoint_conn.execute(f"PRAGMA user_version = {version}")
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):  # busy: another process writes, and starts it over itself
                raise

    def _loop_moved_on(self) -> bool:
        """On the checkpoint thread, `_restarting` just set: True once the loop has run a
        callback since, so every call on it that read the flag before it was set has ended (a
        call on the loop runs from that check to its commit without a pause). Else one could
        still be on its way to BEGIN as the RESTART took the write lock, and wait in SQLite's
        busy handler on the loop (seen: a 12 ms stall in `BEGIN IMMEDIATE`, bench/many_bench.py
        with BENCH_STALL_MS=10). False (no RESTART this time) if the loop is gone or does not
        get to it within a second."""
        moved_on = threading.Event()
        return self._call_loop(moved_on.set) and moved_on.wait(1.0)

    def _call_loop(self, callback: Callable[[], object]) -> bool:
        """From the checkpoint thread: `callback` soon on the loop; False if the loop is closed."""
        try:
            assert self._loop is not None
            self._loop.call_soon_threadsafe(callback)
        except RuntimeError:  # the loop is closed
            return False
        return True

    def _close_checkpoint_conn(self) -> None:
        if self._checkpoint_conn is not None:
            self._checkpoint_conn.close()
            self._checkpoint_conn = None

    # -- connection ----------------------------------------------------------------------
    def _open_db(self) -> list[int]:
        if self.on_disk:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        # autocommit: each lone statement is its own short transaction; batches use BEGIN
        # not same-thread-only: a call that meets a lock waits on another thread (see above)
        # `timeout`: the busy timeout holds from the very first statement
        conn = sqlite3.connect(
            str(self.path),
            isolation_level=None,
            check_same_thread=False,
            timeout=OPEN_BUSY_MS / 1000,
        )
        try:
            db = Database(conn, recursive_triggers=False, execute_plugins=False)
            applied = _prepare(conn, db, wal=self.on_disk)
            conn.execute(f"PRAGMA busy_timeout = {ON_LOOP_BUSY_MS}")
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self._on_conn = SqliteTx(conn)
        return applied

    def _close_db(self) -> None:
        self._closed()
        conn: sqlite3.Connection | None = vars(self).pop("_conn", None)
        if conn is not None:
            try:
                conn.execute("PRAGMA optimize")
                if self.on_disk:
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # leave a tidy file behind
            except sqlite3.Error as exc:  # a full disk, say: the data is safe in the WAL
                log.warning("storage %s closed untidily: %s", self.path, exc)
            finally:
                conn.close()
