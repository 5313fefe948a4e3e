"""Messages with a per-session history cache, plus the tool-call audit and usage rows.

A cached history asks only for rows past its last id (another process sharing the database may
have written to the session: normally that is one index probe, zero rows). That needs a
session's message ids to become visible in increasing order, which a PostgreSQL sequence alone
does not give (ids are taken at INSERT, rows appear at COMMIT, so two writers could commit out
of order). An append therefore first updates the session's row, which locks it until COMMIT:
appends to one session take their ids one writer after another (on SQLite, BEGIN IMMEDIATE
already does). Calls of this process interleave at every await on PostgreSQL, so rows join the
cache by id, once each; and appends to one session from this process run one at a time, in
call order.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Coroutine, Sequence
from typing import Any

import sqlalchemy as sa

from agent.store import UsageRow
from agent.types import AuditRecord, Message
from bot.storage.history_cache import (
    HistoryCache,
    HistoryItem,
    IdRow,
    message_columns,
    message_from_columns,
)
from bot.storage.query import Query, params
from bot.storage.schema import now
from bot.storage.tables import audit_logs, chat_sessions, messages, usage
from bot.storage.turns import insert_turn
from bot.storage.tx import Row, StoreCalls, Tx

AUDIT_RESULT_LIMIT = 4000
INSERT_BATCH = 32  # messages a statement at most (each count of rows is one compiled INSERT)

M = messages
_FIELDS = [
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "name",
    "is_error",
    "tokens_in",
    "tokens_out",
    "parts",
]
_HISTORY_SINCE = Query(
    sa.select(
        M.c.id, M.c.turn_id, M.c.role, M.c.content, M.c.tool_calls, M.c.tool_call_id,
        M.c.name, M.c.is_error, M.c.parts,
    )
    .where(M.c.session_id == sa.bindparam("session_id"), M.c.id > sa.bindparam("since"))
    .order_by(M.c.id)
)  # fmt: skip
_TOUCH_SESSION = Query(
    sa.update(chat_sessions)
    .values(updated_at=sa.bindparam("at"))
    .where(chat_sessions.c.id == sa.bindparam("session_id"))
)
_INSERT_AUDIT = Query(
    sa.insert(audit_logs).values(
        params(
            "session_id", "turn_id", "call_id", "tool_name", "arguments", "result", "ok",
            "duration_ms", "extra", "created_at",
        )
    )
)  # fmt: skip
_USAGE_FIELDS = ["provider", "model", "input_tokens", "output_tokens"]
_INSERT_USAGE = Query(
    sa.insert(usage).values(params("session_id", "turn_id", "created_at", *_USAGE_FIELDS))
)
_INSERTS: dict[int, Query] = {}  # by how many messages: one statement (ids: `Tx.insert_ids`)
_KEYS = [tuple(f"{field}_{i}" for field in _FIELDS) for i in range(INSERT_BATCH)]


def _insert_messages(n: int) -> Query:
    query = _INSERTS.get(n)
    if query is None:
        shared = params("session_id", "turn_id", "created_at")
        rows = [
            shared | {f: sa.bindparam(k) for f, k in zip(_FIELDS, _KEYS[i], strict=True)}
            for i in range(n)
        ]
        query = _INSERTS[n] = Query(sa.insert(M).values(rows), new_ids=M.c.id)
    return query


def _truncate(result: str) -> str:
    if len(result) <= AUDIT_RESULT_LIMIT:
        return result
    marker = f"\n…[truncated: {len(result)} chars in all]"
    return result[: AUDIT_RESULT_LIMIT - len(marker)] + marker


def message_fields(m: Message) -> tuple[Any, ...]:
    """A message's columns (`_FIELDS`, in order) as stored."""
    *head, parts = message_columns(m)
    usage = m.usage
    tokens = (None, None) if usage is None else (usage.input_tokens, usage.output_tokens)
    return (*head, *tokens, parts)


def _history_row(row: Row) -> IdRow:
    row_id, turn_id, *columns = row
    return row_id, (turn_id, message_from_columns(*columns))


class MessageLog(StoreCalls):
    """The message, audit and usage half of the Store protocol, with the history cache."""

    def _init_history(self, cache_bytes: int, hot_messages: int) -> None:
        self._histories = HistoryCache(cache_bytes, hot_messages)
        self._append_locks: dict[str, asyncio.Lock] = {}  # sessions being appended to
        self._appenders: Counter[str] = Counter()  # per session: calls holding or awaiting it
        self._alone = False  # `write_alone`

    def write_alone(self) -> None:
        """This process is its sessions' only writer (`bot serve` without Redis: bot/runtime/
        app.py), so a cached history is all of it: reading one looks for no rows others added
        since, nor does an append (three statements of a turn's 21)."""
        self._alone = True

    async def load_history(self, session_id: str) -> list[HistoryItem]:
        last = self._histories.last_id(session_id)
        if last is not None and self._alone:
            cached = self._histories.merge(session_id, (), last)
            assert cached is not None  # a cached session's history, made the most recent
            return list(cached.items)
        since = last or 0
        rows = await self._tx(_history_since, session_id, since)
        history = self._histories.merge(session_id, rows, since)
        if history is None:  # let go of while its rows were read (PostgreSQL): read them all
            rows = await self._tx(_history_since, session_id, 0)
            history = self._histories.merge(session_id, rows, 0)
            assert history is not None  # all the rows are a history to cache
        return list(history.items)

    def append_messages(
        self,
        session_id: str,
        turn_id: str,
        messages: Sequence[Message],
        usage: Sequence[UsageRow] = (),
    ) -> Coroutine[Any, Any, None]:
        """Awaited as an `async def` is: the coroutine of the call that does it (one layer
        less on every append, ~4k instructions)."""
        if messages:
            return self._append_with(session_id, turn_id, tuple(messages), tuple(usage))
        return self._tx(_usage_only, session_id, turn_id, tuple(usage))

    async def _append_with(
        self,
        session_id: str,
        turn_id: str,
        messages: tuple[Message, ...],
        usage: tuple[UsageRow, ...],
        turn: dict[str, Any] | None = None,
    ) -> None:
        """The append; `turn`: a turn's row to create in the same transaction, first (a turn
        and its user's message are one write: `TurnLog.create_turn`)."""
        if not self.interleaves:  # the call runs to its end at once: no lock (nor a layer)
            since = self._histories.last_id(session_id)
            missed = None if self._alone else since  # where to look for others' rows from
            rows = await self._tx(_append, session_id, turn_id, messages, missed, usage, turn)
            if since is not None:
                self._histories.extend(session_id, rows, since)
            return
        lock = self._append_locks.setdefault(session_id, asyncio.Lock())
        self._appenders[session_id] += 1
        try:
            async with lock:
                since = self._histories.last_id(session_id)
                missed = None if self._alone else since
                rows = await self._tx(_append, session_id, turn_id, messages, missed, usage, turn)
                if since is not None:  # cached when read: joins it (unless let go of since)
                    self._histories.extend(session_id, rows, since)
        finally:
            self._appenders[session_id] -= 1
            if not self._appenders[session_id]:
                del self._appenders[session_id], self._append_locks[session_id]

    async def record_tool_call(self, record: AuditRecord) -> None:
        await self._tx(_record_tool_call, record)

    async def record_usage(
        self,
        *,
        session_id: str,
        turn_id: str | None,
        provider: str,
        model: str,
        input_tokens: int,
        output_tokens: int,
    ) -> None:
        row = UsageRow(provider, model, input_tokens, output_tokens)
        await self._tx(_insert_usage, session_id, turn_id, (row,), now())

    def _remember_empty(self, session_id: str) -> None:
        """A session just created has no messages: its history is known without asking."""
        self._histories.merge(session_id, (), 0)

    def _closed(self) -> None:
        self._histories.clear()
        super()._closed()


# -- the calls, written once for both backends -----------------------------------------
async def _history_since(tx: Tx, /, session_id: str, since: int) -> list[IdRow]:
    return [
        _history_row(row)
        for row in await tx.fetch(_HISTORY_SINCE, session_id=session_id, since=since)
    ]


async def _append(
    tx: Tx,
    /,
    session_id: str,
    turn_id: str,
    messages: tuple[Message, ...],
    since: int | None,
    usage: tuple[UsageRow, ...] = (),
    turn: dict[str, Any] | None = None,
) -> list[IdRow]:
    """Inserts the messages (and `usage` rows); returns the messages with their ids, after the
    rows others added since `since` (none when `since` is None: the session is not cached, or
    nobody else writes).
    `turn`: the row of a turn to insert first, in the same transaction."""
    stamp = now()
    ids: list[int] = []
    async with tx.transaction():
        if turn is not None:
            await insert_turn(tx, turn)
        await tx.execute(_TOUCH_SESSION, session_id=session_id, at=stamp)  # the session's lock
        missed = [] if since is None else await _history_since(tx, session_id, since)
        for start in range(0, len(messages), INSERT_BATCH):
            batch = messages[start : start + INSERT_BATCH]
            values = {"session_id": session_id, "turn_id": turn_id, "created_at": stamp}
            for i, m in enumerate(batch):
                values.update(zip(_KEYS[i], message_fields(m), strict=True))
            ids += await tx.insert_ids(_insert_messages(len(batch)), values)
        if usage:
            await _insert_usage(tx, session_id, turn_id, usage, stamp)
    mine = [(row_id, (turn_id, m)) for row_id, m in zip(ids, messages, strict=True)]
    return missed + mine


async def _insert_usage(
    tx: Tx, /, session_id: str, turn_id: str | None, usage: tuple[UsageRow, ...], stamp: str
) -> None:
    for u in usage:
        await tx.execute(
            _INSERT_USAGE,
            session_id=session_id,
            turn_id=turn_id,
            created_at=stamp,
            provider=u.provider,
            model=u.model,
            input_tokens=u.input_tokens,
            output_tokens=u.output_tokens,
        )


async def _usage_only(
    tx: Tx, /, session_id: str, turn_id: str, usage: tuple[UsageRow, ...]
) -> None:
    if not usage:
        return
    async with tx.transaction():
        await _insert_usage(tx, session_id, turn_id, usage, now())


async def _record_tool_call(tx: Tx, /, r: AuditRecord) -> None:
    await tx.execute(
        _INSERT_AUDIT,
        session_id=r.session_id,
        turn_id=r.turn_id,
        call_id=r.call_id,
        tool_name=r.tool_name,
        arguments=r.arguments,
        result=_truncate(r.result),
        ok=int(r.ok),
        duration_ms=r.duration_ms,
        extra=json.dumps(r.extra, default=str) if r.extra else None,
        created_at=now(),
    )
