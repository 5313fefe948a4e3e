"""The sessions API's records (`adapters.api.records.SessionRecords`) on PostgreSQL."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from adapters.api.records import ApiMessage, ApiSession
from bot.storage.pg.connection import PgConnection

if TYPE_CHECKING:
    from bot.storage.pg.conn import Conn

_COLUMNS = [
    "session_id",
    "message_id",
    "role",
    "text",
    "status",
    "reply_to",
    "display",
    "action",
    "seq",
    "created_at",
]
_SELECT = f"SELECT position, {', '.join(_COLUMNS)} FROM api_messages"
_ADD_MESSAGE = (
    f"INSERT INTO api_messages ({', '.join(_COLUMNS)})"
    f" VALUES ({', '.join(f'${n}' for n in range(1, len(_COLUMNS) + 1))})"
    " ON CONFLICT (session_id, message_id) DO UPDATE"
    " SET text = excluded.text, status = excluded.status, display = excluded.display"
    f" RETURNING position, {', '.join(_COLUMNS)}"
)
_ONE = f"{_SELECT} WHERE session_id = $1 AND message_id = $2"
_REPLY = (
    f"{_SELECT} WHERE session_id = $1 AND reply_to = $2 AND role = 'assistant'"
    " ORDER BY position DESC LIMIT 1"
)
_AFTER = f"{_SELECT} WHERE session_id = $1 AND position > $2 ORDER BY position LIMIT $3"
_BEFORE = f"{_SELECT} WHERE session_id = $1 AND position < $2 ORDER BY position DESC LIMIT $3"


def _message(row: Any) -> ApiMessage:
    display, action = row["display"], row["action"]
    return ApiMessage(
        session_id=row["session_id"],
        message_id=row["message_id"],
        role=row["role"],
        text=row["text"],
        status=row["status"],
        reply_to=row["reply_to"],
        display=tuple(json.loads(display)) if display else (),
        action=json.loads(action) if action else None,
        seq=row["seq"],
        created_at=row["created_at"],
        position=row["position"],
    )


class PgApiRecords(PgConnection):
    """API sessions and their transcript: one short statement per call."""

    async def create_api_session(self, session: ApiSession) -> None:
        s = session
        await self._run(
            _execute,
            "INSERT INTO api_sessions (id, key_id, user_id, created_at) VALUES ($1, $2, $3, $4)",
            s.id,
            s.key_id,
            s.user_id,
            s.created_at,
        )

    async def api_session(self, session_id: str) -> ApiSession | None:
        row = await self._one(
            "SELECT id, key_id, user_id, created_at FROM api_sessions WHERE id = $1", session_id
        )
        return None if row is None else ApiSession(**row)

    async def add_api_message(self, message: ApiMessage) -> ApiMessage:
        m = message
        display = json.dumps([dict(hint) for hint in m.display]) if m.display else None
        action = json.dumps(dict(m.action)) if m.action is not None else None
        row = (m.session_id, m.message_id, m.role, m.text, m.status, m.reply_to, display)
        return await self._run(_fetch_one, _ADD_MESSAGE, *row, action, m.seq, m.created_at)

    async def api_message(self, session_id: str, message_id: str) -> ApiMessage | None:
        rows = await self._run(_fetch, _ONE, session_id, message_id)
        return rows[0] if rows else None

    async def api_reply(self, session_id: str, reply_to: str) -> ApiMessage | None:
        rows = await self._run(_fetch, _REPLY, session_id, reply_to)
        return rows[0] if rows else None

    async def api_messages(
        self, session_id: str, *, limit: int, before: int | None = None, after: int | None = None
    ) -> list[ApiMessage]:
        if after is not None:
            return await self._run(_fetch, _AFTER, session_id, after, limit)
        newest = before if before is not None else 2**63 - 1
        return list(reversed(await self._run(_fetch, _BEFORE, session_id, newest, limit)))


async def _execute(conn: Conn, sql: str, *params: Any) -> None:
    await conn.execute(sql, *params)


async def _fetch(conn: Conn, sql: str, *params: Any) -> list[ApiMessage]:
    # not PgConnection._select: that drops the tables' hidden `seq`, a column of its own here
    return [_message(row) for row in await conn.fetch(sql, *params)]


async def _fetch_one(conn: Conn, sql: str, *params: Any) -> ApiMessage:
    return _message(await conn.fetchrow(sql, *params))
