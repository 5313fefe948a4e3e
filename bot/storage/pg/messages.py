"""Messages with a per-session history cache, plus the tool-call audit and usage rows (PostgreSQL).

The cache works as SqliteStore's (`bot.storage.messages`): a cached history asks only for rows
past its last id. That needs a session's message ids to become visible in increasing order,
which a sequence alone does not give (ids are taken at INSERT, rows appear at COMMIT, so two
writers could commit out of order). An append therefore first updates the session's row,
which locks it until COMMIT: appends to one session take their ids one writer after another.
Calls of this process interleave at every await, so rows join the cache by id, once each; and
appends to one session from this process run one at a time, in call order, as on SQLite.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from agent.store import UsageRow
from agent.types import AuditRecord, Message
from bot.storage.messages import (
    HISTORY_KEEP,
    HISTORY_TRIM_AT,
    History,
    HistoryItem,
    _history_item,
    _message_fields,
    _truncate,
    _usage_rows,
)
from bot.storage.pg.connection import PgConnection
from bot.storage.schema import now

if TYPE_CHECKING:
    from bot.storage.pg.connection import Conn

_HISTORY_SINCE = (
    "SELECT id, turn_id, role, content, tool_calls, tool_call_id, name, is_error, parts"
    " FROM messages WHERE session_id = $1 AND id > $2 ORDER BY id"
)
_TOUCH_SESSION = "UPDATE chat_sessions SET updated_at = $2 WHERE id = $1"
# one statement for a turn's messages, whatever their number
_INSERT_MESSAGES = (
    "INSERT INTO messages (session_id, turn_id, created_at, role, content, tool_calls,"
    " tool_call_id, name, is_error, tokens_in, tokens_out, parts)"
    " SELECT $1, $2, $3, * FROM unnest($4::text[], $5::text[], $6::text[], $7::text[],"
    " $8::text[], $9::int[], $10::int[], $11::int[], $12::text[]) RETURNING id"
)
_INSERT_AUDIT = (
    "INSERT INTO audit_logs (session_id, turn_id, call_id, tool_name, arguments, result, ok,"
    " duration_ms, extra, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
)
_INSERT_USAGE = (
    "INSERT INTO usage (session_id, turn_id, provider, model, input_tokens, output_tokens,"
    " created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)"
)

Row = tuple[int, HistoryItem]  # message id, (turn id, message)


class PgMessageLog(PgConnection):
    """The message, audit and usage half of the Store protocol."""

    def __init__(self, url: str, *, history_cache_size: int = 256, **pool: Any) -> None:
        super().__init__(url, **pool)
        self._histories: OrderedDict[str, History] = OrderedDict()
        self._cache_size = history_cache_size
        self._append_locks: dict[str, asyncio.Lock] = {}  # sessions being appended to
        self._appenders: Counter[str] = Counter()  # per session: calls holding or awaiting it

    async def load_history(self, session_id: str) -> list[HistoryItem]:
        history = self._histories.get(session_id)
        since = 0 if history is None else history.last_id
        rows = await self._run(_history_since, session_id, since)
        return list(self._merge(session_id, rows).items)

    async def append_messages(
        self,
        session_id: str,
        turn_id: str,
        messages: Sequence[Message],
        usage: Sequence[UsageRow] = (),
    ) -> None:
        if not messages:
            if usage:
                rows = _usage_rows(session_id, turn_id, usage, now())
                await self._run(_execute_many, _INSERT_USAGE, rows)
            return
        lock = self._append_locks.setdefault(session_id, asyncio.Lock())
        self._appenders[session_id] += 1
        try:
            async with lock:
                history = self._histories.get(session_id)
                since = None if history is None else history.last_id
                rows = await self._run(
                    _append, session_id, turn_id, tuple(messages), since, tuple(usage)
                )
                if session_id in self._histories:
                    self._merge(session_id, rows)
        finally:
            self._appenders[session_id] -= 1
            if not self._appenders[session_id]:
                del self._appenders[session_id], self._append_locks[session_id]

    async def record_tool_call(self, record: AuditRecord) -> None:
        r = record
        extra = json.dumps(r.extra, default=str) if r.extra else None
        row = (r.session_id, r.turn_id, r.call_id, r.tool_name, r.arguments, _truncate(r.result))
        await self._run(_execute, _INSERT_AUDIT, *row, int(r.ok), r.duration_ms, extra, now())

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
        row = (session_id, turn_id, provider, model, input_tokens, output_tokens, now())
        await self._run(_execute, _INSERT_USAGE, *row)

    def _merge(self, session_id: str, rows: Iterable[Row]) -> History:
        """Rows past the cached history's last id join it, in id order; returns the history."""
        history = self._histories.get(session_id)
        if history is None:
            history = self._histories[session_id] = History(0, [])
            if len(self._histories) > self._cache_size:
                self._histories.popitem(last=False)
        else:
            self._histories.move_to_end(session_id)
        for row_id, item in rows:
            if row_id > history.last_id:
                history.items.append(item)
                history.last_id = row_id
        if len(history.items) > HISTORY_TRIM_AT:
            del history.items[: len(history.items) - HISTORY_KEEP]
        return history

    def _remember_empty(self, session_id: str) -> None:
        """A session just created has no messages: its history is known without asking."""
        self._merge(session_id, ())

    def _closed(self) -> None:
        self._histories.clear()


async def _execute(conn: Conn, sql: str, *params: Any) -> None:
    await conn.execute(sql, *params)


async def _execute_many(conn: Conn, sql: str, rows: list[tuple[Any, ...]]) -> None:
    await conn.executemany(sql, rows)


async def _history_since(conn: Conn, session_id: str, since: int) -> list[Row]:
    rows = await conn.fetch(_HISTORY_SINCE, session_id, since)
    return [(row[0], _history_item(tuple(row))) for row in rows]


async def _append(
    conn: Conn,
    session_id: str,
    turn_id: str,
    messages: tuple[Message, ...],
    since: int | None,
    usage: tuple[UsageRow, ...] = (),
) -> list[Row]:
    """Inserts the messages (and `usage` rows); returns the messages with their ids, after the
    rows others added since `since` (none when `since` is None: the session is not cached)."""
    stamp = now()
    columns = list(zip(*(_message_fields(m) for m in messages), strict=True))
    async with conn.transaction():
        await conn.execute(_TOUCH_SESSION, session_id, stamp)  # the per-session lock; see above
        missed = [] if since is None else await _history_since(conn, session_id, since)
        ids = await conn.fetch(_INSERT_MESSAGES, session_id, turn_id, stamp, *columns)
        if usage:
            await conn.executemany(_INSERT_USAGE, _usage_rows(session_id, turn_id, usage, stamp))
    mine = [(row[0], (turn_id, m)) for row, m in zip(ids, messages, strict=True)]
    return missed + mine
