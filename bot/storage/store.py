"""SqliteStore: sessions, plus the messages, turns, records and views mixed in from beside it."""

from __future__ import annotations

import uuid
from typing import cast

from bot.storage.api_records import ApiRecords
from bot.storage.blob_records import BlobTable
from bot.storage.claims import EventClaims
from bot.storage.conversation_states import ConversationStateTable
from bot.storage.messages import History, MessageLog
from bot.storage.quotas import QuotaCounters
from bot.storage.records import UserRecords
from bot.storage.schema import SESSION_STATUSES, check_status, insert_sql, now
from bot.storage.turns import TurnLog
from bot.storage.views import AdminViews

SessionKey = tuple[str, str, str, str]  # channel, conversation_key, user_id, agent_id

_INSERT_SESSION = insert_sql(
    "chat_sessions",
    "id channel conversation_key user_id agent_id parent_session_id status persona_version"
    " created_at updated_at",
)
# rowid order is creation order, and idx_session_key ends in rowid, so there is nothing to sort
_FIND_ACTIVE = (
    "SELECT id FROM chat_sessions WHERE channel = ? AND conversation_key = ? AND user_id = ?"
    " AND agent_id = ? AND status = 'active' ORDER BY rowid DESC LIMIT 1"
)
_SET_STATUS = "UPDATE chat_sessions SET status = ?, updated_at = ? WHERE id = ?"
_CLOSE_ACTIVE = (
    "UPDATE chat_sessions SET status = 'closed', updated_at = ? WHERE channel = ?"
    " AND conversation_key = ? AND user_id = ? AND agent_id = ? AND status = 'active'"
)


class SqliteStore(
    MessageLog,
    TurnLog,
    EventClaims,
    QuotaCounters,
    UserRecords,
    AdminViews,
    ApiRecords,
    BlobTable,
    ConversationStateTable,
):
    """The `agent.store.Store` protocol plus what the gateway needs, on one SQLite connection.

    Every public method is a coroutine (so a store on another backend can really await) that
    runs one short transaction on the loop; WAL checkpoints run on their own thread (see
    `bot.storage.connection` for why, with the measurements).
    """

    # -- the Store protocol (messages, audit and usage: MessageLog) ----------------------
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
        return await self._run(self._insert_session, key, parent_session_id, persona_version)

    async def set_session_status(self, session_id: str, status: str) -> None:
        check_status(status, SESSION_STATUSES, "session")
        await self._run(self._update, _SET_STATUS, (status, now(), session_id), "session")

    async def close_session(self, session_id: str) -> None:
        await self.set_session_status(session_id, "closed")

    async def close_active_sessions(
        self, *, channel: str, conversation_key: str, user_id: str, agent_id: str = "default"
    ) -> int:
        """`/new`: the conversation's active sessions for this user close; how many there were."""
        key = (channel, conversation_key, user_id, agent_id)
        return await self._run(self._close_active_db, key)

    # -- gateway (turns: TurnLog) --------------------------------------------------------
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
        return await self._run(self._active_session_db, key, persona_version)

    # -- the SQL, one short transaction each --------------------------------------------
    def _insert_session(
        self, key: SessionKey, parent_session_id: str | None, persona_version: str | None
    ) -> str:
        session_id, stamp = uuid.uuid4().hex, now()
        row = (session_id, *key, parent_session_id, "active", persona_version, stamp, stamp)
        self._conn.execute(_INSERT_SESSION, row)
        self._remember(session_id, History(0, []))  # a new session's history is known: empty
        return session_id

    def _close_active_db(self, key: SessionKey) -> int:
        return self._conn.execute(_CLOSE_ACTIVE, (now(), *key)).rowcount

    def _active_session_db(self, key: SessionKey, persona_version: str | None) -> str:
        row = self._conn.execute(_FIND_ACTIVE, key).fetchone()
        if row is None:
            with self._transaction() as conn:  # look again under the lock: other processes
                row = conn.execute(_FIND_ACTIVE, key).fetchone()
                if row is None:
                    return self._insert_session(key, None, persona_version)
        return cast(str, row[0])
