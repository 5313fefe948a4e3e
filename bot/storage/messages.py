"""Messages with a per-session history cache, plus the tool-call audit and usage rows."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from agent.store import UsageRow
from agent.types import AuditRecord, Message, Role, ToolCall
from bot.storage.connection import StoreConnection
from bot.storage.schema import insert_sql, now
from content.parts import parts_from_json, parts_to_json

HistoryItem = tuple[str, Message]
AUDIT_RESULT_LIMIT = 4000

_INSERT_MESSAGE = insert_sql(
    "messages",
    "session_id turn_id role content tool_calls tool_call_id name is_error tokens_in tokens_out"
    " parts created_at",
)
_INSERT_AUDIT = insert_sql(
    "audit_logs",
    "session_id turn_id call_id tool_name arguments result ok duration_ms extra created_at",
)
_INSERT_USAGE = insert_sql(
    "usage", "session_id turn_id provider model input_tokens output_tokens created_at"
)
_HISTORY_SINCE = (
    "SELECT id, turn_id, role, content, tool_calls, tool_call_id, name, is_error, parts"
    " FROM messages WHERE session_id = ? AND id > ? ORDER BY id"
)
_TOUCH_SESSION = "UPDATE chat_sessions SET updated_at = ? WHERE id = ?"


def _truncate(result: str) -> str:
    if len(result) <= AUDIT_RESULT_LIMIT:
        return result
    marker = f"\n…[truncated: {len(result)} chars in all]"
    return result[: AUDIT_RESULT_LIMIT - len(marker)] + marker


def _message_fields(m: Message) -> tuple[Any, ...]:
    calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls]
    return (
        m.role,
        m.content,
        json.dumps(calls) if calls else None,
        m.tool_call_id,
        m.name,
        int(m.is_error),
        None if m.usage is None else m.usage.input_tokens,
        None if m.usage is None else m.usage.output_tokens,
        parts_to_json(m.parts),
    )


def _usage_rows(
    session_id: str, turn_id: str, usage: Sequence[UsageRow], stamp: str
) -> list[tuple[Any, ...]]:
    return [
        (session_id, turn_id, u.provider, u.model, u.input_tokens, u.output_tokens, stamp)
        for u in usage
    ]


def _history_item(row: tuple[Any, ...]) -> HistoryItem:
    _, turn_id, role, content, calls, call_id, name, is_error, parts = row
    tool_calls = (
        tuple(ToolCall(c["id"], c["name"], c["arguments"]) for c in json.loads(calls))
        if calls
        else ()
    )
    return turn_id, Message(
        cast(Role, role),
        content,
        tool_calls,
        call_id,
        name,
        bool(is_error),
        parts=parts_from_json(parts),
    )


# A cached history keeps the newest messages only (the model never sees more than its context
# budget), trimmed in steps so the history window recounts rarely.
HISTORY_KEEP = 5000
HISTORY_TRIM_AT = 6000


class History:
    """A session's cached history and the id of the last message row it includes."""

    __slots__ = ("items", "last_id")

    def __init__(self, last_id: int, items: list[HistoryItem]) -> None:
        self.last_id = last_id
        self.items = items


class MessageLog(StoreConnection):
    """The message, audit and usage half of the Store protocol; kept beside the connection."""

    def __init__(self, path: str | Path, *, history_cache_size: int = 256) -> None:
        super().__init__(path)
        self._histories: OrderedDict[str, History] = OrderedDict()
        self._cache_size = history_cache_size

    async def load_history(self, session_id: str) -> list[tuple[str, Message]]:
        return await self._run(self._load_history_db, session_id)

    async def append_messages(
        self,
        session_id: str,
        turn_id: str,
        messages: Sequence[Message],
        usage: Sequence[UsageRow] = (),
    ) -> None:
        if messages:
            await self._run(self._append_db, session_id, turn_id, tuple(messages), tuple(usage))
        elif usage:
            await self._run(self._insert_usage_db, session_id, turn_id, tuple(usage))

    async def record_tool_call(self, record: AuditRecord) -> None:
        await self._run(self._record_tool_call_db, record)

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
        row = (session_id, turn_id, provider, model, input_tokens, output_tokens)
        await self._run(self._insert, _INSERT_USAGE, row)

    # -- the SQL, one short transaction each --------------------------------------------
    def _close_db(self) -> None:
        self._histories.clear()
        super()._close_db()

    def _remember(self, session_id: str, history: History) -> None:
        self._histories[session_id] = history
        if len(self._histories) > self._cache_size:
            self._histories.popitem(last=False)

    def _load_history_db(self, session_id: str) -> list[HistoryItem]:
        history = self._histories.get(session_id)
        # A cached history still asks for rows past its last id: another process sharing the
        # file may have written to this session. Normally that is one index probe, zero rows.
        rows = self._conn.execute(
            _HISTORY_SINCE, (session_id, 0 if history is None else history.last_id)
        ).fetchall()
        if history is None:
            history = History(0, [])
            self._remember(session_id, history)
        else:
            self._histories.move_to_end(session_id)
        if rows:
            history.items.extend(map(_history_item, rows))
            history.last_id = rows[-1][0]
        if len(history.items) > HISTORY_TRIM_AT:
            del history.items[: len(history.items) - HISTORY_KEEP]
        return list(history.items)

    def _append_db(
        self,
        session_id: str,
        turn_id: str,
        messages: tuple[Message, ...],
        usage: tuple[UsageRow, ...] = (),
    ) -> None:
        stamp = now()
        rows = [(session_id, turn_id, *_message_fields(m), stamp) for m in messages]
        history = self._histories.get(session_id)
        with self._transaction() as conn:
            # rows another process added since our cache was filled must precede ours in it
            missed = (
                []
                if history is None
                else conn.execute(_HISTORY_SINCE, (session_id, history.last_id)).fetchall()
            )
            conn.executemany(_INSERT_MESSAGE, rows)
            last_id = conn.execute("SELECT last_insert_rowid()").fetchone()[0]
            conn.execute(_TOUCH_SESSION, (stamp, session_id))
            if usage:
                conn.executemany(_INSERT_USAGE, _usage_rows(session_id, turn_id, usage, stamp))
        if history is not None:
            history.items.extend(map(_history_item, missed))
            history.items.extend((turn_id, m) for m in messages)
            history.last_id = last_id
            self._histories.move_to_end(session_id)

    def _insert_usage_db(self, session_id: str, turn_id: str, usage: tuple[UsageRow, ...]) -> None:
        with self._transaction() as conn:
            conn.executemany(_INSERT_USAGE, _usage_rows(session_id, turn_id, usage, now()))

    def _record_tool_call_db(self, r: AuditRecord) -> None:
        extra = json.dumps(r.extra, default=str) if r.extra else None
        call = (r.session_id, r.turn_id, r.call_id, r.tool_name, r.arguments)
        self._insert(_INSERT_AUDIT, (*call, _truncate(r.result), int(r.ok), r.duration_ms, extra))
