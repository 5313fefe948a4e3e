"""`Tx`: how a store call written once reaches either database.

A store call is an `async def op(tx, ...)` that runs its queries (`bot.storage.query`) through
`tx`. On PostgreSQL `tx` wraps a pooled asyncpg connection and really awaits. On SQLite it wraps
the store's one connection and never suspends, so `run_now` drives the call to its end at once,
synchronously: on the loop (the measured way, `bot.storage.connection`) or on the thread that
waits for another process's lock, exactly like the plain functions it replaces.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from bot.storage.query import Dialect, Query

T = TypeVar("T")
P = ParamSpec("P")


class Row(Protocol):
    """A sqlite3 row (a tuple) or an asyncpg Record: read by position."""

    def __getitem__(self, index: int, /) -> Any: ...

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[Any]: ...


class Transaction(Protocol):
    async def __aenter__(self) -> object: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None: ...


class Tx(Protocol):
    """One database connection, for the length of one store call."""

    @property
    def dialect(self) -> Dialect: ...

    async def fetch(self, query: Query, **values: Any) -> list[Row]: ...

    async def fetchone(self, query: Query, **values: Any) -> Row | None: ...

    async def execute(self, query: Query, **values: Any) -> int:
        """Runs the statement; how many rows it changed."""
        ...

    def transaction(self) -> Transaction:
        """The calls inside are one transaction (SQLite: BEGIN IMMEDIATE, the write lock)."""
        ...


Op = Callable[Concatenate[Tx, P], Awaitable[T]]


class StoreCalls:
    """What the tables written once need from a backend's connection: `_tx(op, ...)` runs
    `op(tx, ...)` as one store call (its faults become `StorageError`, as every call's do)."""

    async def _tx(self, op: Op[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        raise NotImplementedError  # StoreConnection and PgConnection, later in the MRO


def run_now(work: Awaitable[T]) -> T:
    """The result of a coroutine that never suspends (a call on `SqliteTx`), computed now."""
    coro: Coroutine[Any, Any, T] = work  # type: ignore[assignment]
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("a SQLite store call awaited something that suspends")


class SqliteTx:
    """`Tx` on the SQLite store's connection (autocommit: a lone statement commits itself)."""

    __slots__ = ("conn",)
    dialect: Dialect = "sqlite"

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    async def fetch(self, query: Query, **values: Any) -> list[Row]:
        sql = query.sql("sqlite")
        return self.conn.execute(sql.text, query.args("sqlite", values)).fetchall()

    async def fetchone(self, query: Query, **values: Any) -> Row | None:
        sql = query.sql("sqlite")
        row: Row | None = self.conn.execute(sql.text, query.args("sqlite", values)).fetchone()
        return row

    async def execute(self, query: Query, **values: Any) -> int:
        sql = query.sql("sqlite")
        return self.conn.execute(sql.text, query.args("sqlite", values)).rowcount

    def transaction(self) -> Transaction:
        return _SqliteTransaction(self.conn)


class _SqliteTransaction:
    __slots__ = ("conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    async def __aenter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")  # read-then-write must not deadlock on upgrade

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.conn.execute("COMMIT")
        elif self.conn.in_transaction:
            self.conn.execute("ROLLBACK")
