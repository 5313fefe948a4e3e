"""`Tx`: how a store call written once reaches either database.

A store call is an `async def op(tx, ...)` that runs its queries (`bot.storage.query`) through
`tx`. On PostgreSQL `tx` wraps a pooled asyncpg connection and really awaits. On SQLite it wraps
the store's one connection and never suspends, so the call runs to its end at once: awaited on
the loop (the measured way, `bot.storage.connection`), or driven by `run_now` on the thread that
waits for another process's lock, exactly like the plain functions it replaces.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from types import TracebackType
from typing import Any, ClassVar, Concatenate, Generic, ParamSpec, Protocol, TypeVar

from sqlalchemy.sql.expression import Executable

from bot.storage.query import Dialect, Query


class Record(Protocol):
    """A dataclass (bot/storage/rows.py): what `RowQuery` makes of each row."""

    __dataclass_fields__: ClassVar[dict[str, Any]]


T = TypeVar("T")
R = TypeVar("R", bound=Record)
P = ParamSpec("P")
# A statement's values by name: a mapping, or keywords (`tx.execute(query, values, **named)`)
Values = Mapping[str, Any]


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

    async def fetch(
        self, query: Query, values: Values | None = None, /, **named: Any
    ) -> list[Row]: ...

    async def fetchone(
        self, query: Query, values: Values | None = None, /, **named: Any
    ) -> Row | None: ...

    async def execute(self, query: Query, values: Values | None = None, /, **named: Any) -> int:
        """Runs the statement; how many rows it changed."""
        ...

    async def insert_ids(
        self, query: Query, values: Values | None = None, /, **named: Any
    ) -> list[int]:
        """Runs an INSERT of one or more rows (a `Query` with `new_ids`); their new keys, in
        VALUES order."""
        ...

    def transaction(self) -> Transaction:
        """The calls inside are one transaction (SQLite: BEGIN IMMEDIATE, the write lock)."""
        ...

    async def lock(self, *key: str) -> None:
        """Inside a transaction: one at a time per `key` across processes, until it ends
        (PostgreSQL: an advisory lock; SQLite: nothing, BEGIN IMMEDIATE holds the one lock)."""
        ...


Op = Callable[Concatenate[Tx, P], Awaitable[T]]


class StoreCalls:
    """What the tables written once need from a backend's connection: `_tx(op, ...)` runs
    `op(tx, ...)` as one store call (its faults become `StorageError`, as every call's do).
    `interleaves`: whether this process's calls can interleave (they await the database), so
    that what must run one at a time needs a lock of its own (SQLite's calls never do)."""

    interleaves = True

    async def _tx(self, op: Op[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        raise NotImplementedError  # StoreConnection and PgConnection, later in the MRO

    def _closed(self) -> None:
        """Hook for what keeps state beside the connection (the history cache), at close."""


async def update_one(
    tx: Tx, query: Query, what: str, ident: str, values: Values | None = None, /, **named: Any
) -> None:
    """An UPDATE of the row `ident`; LookupError when there is none."""
    if await tx.execute(query, values, **named) == 0:
        raise LookupError(f"no {what} with id {ident!r}; create it first")


class RowQuery(Generic[R]):
    """A SELECT whose rows are `record`s (bot/storage/rows.py): its columns must be the
    record's fields, in order, which is checked here, once (a column added to a table but not
    to its record fails at import, not on some later read)."""

    __slots__ = ("query", "record")

    def __init__(self, statement: Executable, record: type[R]) -> None:
        self.query = Query(statement)
        fields = tuple(field.name for field in dataclasses.fields(record))
        if self.query.columns != fields:
            raise TypeError(
                f"{record.__name__} has the fields {fields}, its query the columns"
                f" {self.query.columns}; make them the same (bot/storage/rows.py)"
            )
        self.record: Callable[..., R] = record


async def fetch_rows(tx: Tx, rows: RowQuery[R], /, **values: Any) -> list[R]:
    """The rows of `rows.query` as its records."""
    record = rows.record
    return [record(*row) for row in await tx.fetch(rows.query, **values)]


def run_now(work: Awaitable[T]) -> T:
    """The result of a coroutine that never suspends (a call on `SqliteTx`), computed now."""
    coro: Coroutine[Any, Any, T] = work  # type: ignore[assignment]
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("a SQLite store call awaited something that suspends")


_DRIVERS: dict[Callable[..., Any], Callable[..., Any]] = {}


def driver(op: Op[P, T]) -> Callable[[Tx, tuple[Any, ...], dict[str, Any]], T]:
    """`op` as a plain function of (tx, args, kwargs) run by `run_now`, named as `op` (the kind
    of call `trouble` counts by); made once per op."""
    drive = _DRIVERS.get(op)
    if drive is None:

        def drive(tx: Tx, args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
            return run_now(op(tx, *args, **kwargs))

        drive.__name__ = op.__name__
        _DRIVERS[op] = drive
    return drive


class SqliteTx:
    """`Tx` on the SQLite store's connection (autocommit: a lone statement commits itself).

    Values given only by keyword (the usual way) go straight to `pick`, not through `bind`: a
    layer of Python costs each statement ~1k instructions (a missing one is a KeyError then).
    """

    __slots__ = ("_run", "_transaction", "conn")
    dialect: Dialect = "sqlite"

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._run = conn.execute
        self._transaction = _SqliteTransaction(conn)  # holds nothing between uses

    async def fetch(self, query: Query, values: Values | None = None, /, **named: Any) -> list[Row]:
        sql = query.sqlite or query.sql("sqlite")
        return self._run(
            sql.text, sql.pick(named) if values is None else sql.bind(values, named)
        ).fetchall()

    async def fetchone(
        self, query: Query, values: Values | None = None, /, **named: Any
    ) -> Row | None:
        sql = query.sqlite or query.sql("sqlite")
        row: Row | None = self._run(
            sql.text, sql.pick(named) if values is None else sql.bind(values, named)
        ).fetchone()
        return row

    async def execute(self, query: Query, values: Values | None = None, /, **named: Any) -> int:
        sql = query.sqlite or query.sql("sqlite")
        return self._run(
            sql.text, sql.pick(named) if values is None else sql.bind(values, named)
        ).rowcount

    async def insert_ids(
        self, query: Query, values: Values | None = None, /, **named: Any
    ) -> list[int]:
        """The rows of one INSERT take consecutive rowids, in VALUES order: the statement holds
        the database's one write lock while it runs."""
        sql = query.sqlite or query.sql("sqlite")
        cursor = self._run(sql.text, sql.pick(named) if values is None else sql.bind(values, named))
        last = cursor.lastrowid
        assert last is not None  # an INSERT sets it
        return list(range(last - cursor.rowcount + 1, last + 1))

    def transaction(self) -> Transaction:
        return self._transaction

    async def lock(self, *key: str) -> None:
        """Nothing: the transaction's BEGIN IMMEDIATE holds the database's one write lock."""


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
