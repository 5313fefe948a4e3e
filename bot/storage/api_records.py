"""The sessions API's records (`adapters.api.records.SessionRecords`) on the gateway's database."""

from __future__ import annotations

import json
from typing import Any

from adapters.api.records import ApiMessage, ApiSession
from bot.storage.connection import StoreConnection
from bot.storage.schema import insert_sql

_INSERT_SESSION = insert_sql("api_sessions", "id key_id user_id created_at")
_COLUMNS = "session_id message_id role text status reply_to display action seq created_at"
_SELECT = f"SELECT position, {', '.join(_COLUMNS.split())} FROM api_messages"
_ADD_MESSAGE = (
    insert_sql("api_messages", _COLUMNS) + " ON CONFLICT (session_id, message_id) DO UPDATE"
    " SET text = excluded.text, status = excluded.status, display = excluded.display"
)
_ONE = f"{_SELECT} WHERE session_id = ? AND message_id = ?"
_REPLY = (
    f"{_SELECT} WHERE session_id = ? AND reply_to = ? AND role = 'assistant'"
    " ORDER BY position DESC LIMIT 1"
)
_AFTER = f"{_SELECT} WHERE session_id = ? AND position > ? ORDER BY position LIMIT ?"
# the newest `limit` before a position, read newest first and turned around
_BEFORE = f"{_SELECT} WHERE session_id = ? AND position < ? ORDER BY position DESC LIMIT ?"


def _message(row: tuple[Any, ...]) -> ApiMessage:
    position, session_id, message_id, role, text, status, reply_to, display, action, seq, at = row
    return ApiMessage(
        session_id=session_id,
        message_id=message_id,
        role=role,
        text=text,
        status=status,
        reply_to=reply_to,
        display=tuple(json.loads(display)) if display else (),
        action=json.loads(action) if action else None,
        seq=seq,
        created_at=at,
        position=position,
    )


class ApiRecords(StoreConnection):
    """API sessions and their transcript: one short statement per call."""

    async def create_api_session(self, session: ApiSession) -> None:
        await self._run(self._create_session_db, session)

    async def api_session(self, session_id: str) -> ApiSession | None:
        row = await self._one("SELECT * FROM api_sessions WHERE id = ?", session_id)
        return None if row is None else ApiSession(**row)

    async def add_api_message(self, message: ApiMessage) -> ApiMessage:
        return await self._run(self._add_message_db, message)

    async def api_message(self, session_id: str, message_id: str) -> ApiMessage | None:
        return await self._run(self._one_message_db, session_id, message_id)

    async def api_reply(self, session_id: str, reply_to: str) -> ApiMessage | None:
        return await self._run(self._reply_db, session_id, reply_to)

    async def api_messages(
        self, session_id: str, *, limit: int, before: int | None = None, after: int | None = None
    ) -> list[ApiMessage]:
        return await self._run(self._messages_db, session_id, limit, before, after)

    # -- the SQL ------------------------------------------------------------------------
    def _create_session_db(self, s: ApiSession) -> None:
        self._conn.execute(_INSERT_SESSION, (s.id, s.key_id, s.user_id, s.created_at))

    def _add_message_db(self, m: ApiMessage) -> ApiMessage:
        display = json.dumps([dict(hint) for hint in m.display]) if m.display else None
        action = json.dumps(dict(m.action)) if m.action is not None else None
        row = (m.session_id, m.message_id, m.role, m.text, m.status, m.reply_to, display)
        with self._transaction() as conn:
            conn.execute(_ADD_MESSAGE, (*row, action, m.seq, m.created_at))
            kept = conn.execute(_ONE, (m.session_id, m.message_id)).fetchone()
        return _message(kept)

    def _one_message_db(self, session_id: str, message_id: str) -> ApiMessage | None:
        row = self._conn.execute(_ONE, (session_id, message_id)).fetchone()
        return None if row is None else _message(row)

    def _reply_db(self, session_id: str, reply_to: str) -> ApiMessage | None:
        row = self._conn.execute(_REPLY, (session_id, reply_to)).fetchone()
        return None if row is None else _message(row)

    def _messages_db(
        self, session_id: str, limit: int, before: int | None, after: int | None
    ) -> list[ApiMessage]:
        if after is not None:
            rows = self._conn.execute(_AFTER, (session_id, after, limit)).fetchall()
            return [_message(row) for row in rows]
        newest = before if before is not None else 2**63 - 1
        rows = self._conn.execute(_BEFORE, (session_id, newest, limit)).fetchall()
        return [_message(row) for row in reversed(rows)]
