"""PostgresStore: sessions, plus the messages, turns, records and views mixed in from beside it."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from bot.storage.blob_records import BlobTable
from bot.storage.conversation_states import ConversationStateTable
from bot.storage.pg.api_records import PgApiRecords
from bot.storage.pg.claims import PgEventClaims
from bot.storage.pg.connection import rowcount
from bot.storage.pg.messages import PgMessageLog
from bot.storage.pg.quotas import PgQuotaCounters
from bot.storage.pg.records import PgUserRecords
from bot.storage.pg.turns import PgTurnLog, update
from bot.storage.pg.views import PgAdminViews
from bot.storage.schema import SESSION_STATUSES, check_status, now

if TYPE_CHECKING:
    from bot.storage.pg.connection import Conn

SessionKey = tuple[str, str, str, str]  # channel, conversation_key, user_id, agent_id

_INSERT_SESSION = (
    "INSERT INTO chat_sessions (id, channel, conversation_key, user_id, agent_id,"
    " parent_session_id, status, persona_version, created_at, updated_at)"
    " VALUES ($1, $2, $3, $4, $5, $6, 'active', $7, $8, $8)"
)
_FIND_ACTIVE = (
    "SELECT id FROM chat_sessions WHERE channel = $1 AND conversation_key = $2 AND user_id = $3"
    " AND agent_id = $4 AND status = 'active' ORDER BY seq DESC LIMIT 1"
)
# finding-then-creating a conversation's session is one at a time per key, across processes
_LOCK_KEY = (
    "SELECT pg_advisory_xact_lock(hashtextextended("
    "concat_ws(chr(31), $1::text, $2::text, $3::text, $4::text), 0))"
)
_SET_STATUS = "UPDATE chat_sessions SET status = $1, updated_at = $2 WHERE id = $3"
_CLOSE_ACTIVE = (
    "UPDATE chat_sessions SET status = 'closed', updated_at = $1 WHERE channel = $2"
    " AND conversation_key = $3 AND user_id = $4 AND agent_id = $5 AND status = 'active'"
)


class PostgresStore(
    PgMessageLog,
    PgTurnLog,
    PgEventClaims,
    PgQuotaCounters,
    PgUserRecords,
    PgAdminViews,
    PgApiRecords,
    BlobTable,
    ConversationStateTable,
):
    """The whole `bot.storage.base.Store` on a PostgreSQL pool: for gateway processes on
    several hosts. Each public method is one statement or one short transaction."""

    async def create_session(
        self,
        *,
        agent_id: str,
        channel: str,
        conversation_key: str,
        user_id: str,
        parent_session_id: str | None = None,
        persona_version: str | None = None,
    ) -> str:
        key = (channel, conversation_key, user_id, agent_id)
        session_id = await self._run(_insert_session, key, parent_session_id, persona_version)
        self._remember_empty(session_id)
        return session_id

    async def set_session_status(self, session_id: str, status: str) -> None:
        check_status(status, SESSION_STATUSES, "session")
        await self._run(update, _SET_STATUS, (status, now(), session_id), "session")

    async def close_session(self, session_id: str) -> None:
        await self.set_session_status(session_id, "closed")

    async def close_active_sessions(
        self, *, channel: str, conversation_key: str, user_id: str, agent_id: str = "default"
    ) -> int:
        """`/new`: the conversation's active sessions for this user close; how many there were."""
        key = (channel, conversation_key, user_id, agent_id)
        return await self._run(_close_active, key)

    async def active_session(
        self,
        *,
        channel: str,
        conversation_key: str,
        user_id: str,
        agent_id: str = "default",
        persona_version: str | None = None,
    ) -> str:
        """The newest active session of this conversation, user and persona, else a new one."""
        key = (channel, conversation_key, user_id, agent_id)
        session_id, created = await self._run(_active_session, key, persona_version)
        if created:
            self._remember_empty(session_id)
        return session_id


async def _insert_session(
    conn: Conn,
    key: SessionKey,
    parent_session_id: str | None,
    persona_version: str | None,
) -> str:
    session_id = uuid.uuid4().hex
    await conn.execute(_INSERT_SESSION, session_id, *key, parent_session_id, persona_version, now())
    return session_id


async def _close_active(conn: Conn, key: SessionKey) -> int:
    return rowcount(await conn.execute(_CLOSE_ACTIVE, now(), *key))


async def _active_session(
    conn: Conn, key: SessionKey, persona_version: str | None
) -> tuple[str, bool]:
    """The session id, and whether it was created now."""
    found = await conn.fetchval(_FIND_ACTIVE, *key)
    if found is not None:
        return str(found), False
    async with conn.transaction():
        await conn.execute(_LOCK_KEY, *key)
        found = await conn.fetchval(_FIND_ACTIVE, *key)  # look again under the lock
        if found is not None:
            return str(found), False
        return await _insert_session(conn, key, None, persona_version), True
