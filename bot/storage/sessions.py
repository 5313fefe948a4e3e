"""Chat sessions: a conversation's active session per user and persona, created once, closed by /new."""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa

from bot.storage.query import Query, params
from bot.storage.rows import SessionRow
from bot.storage.schema import SESSION_STATUSES, check_status, now
from bot.storage.tables import chat_sessions as S
from bot.storage.tables import creation_order
from bot.storage.tx import RowQuery, StoreCalls, Tx, fetch_rows, update_one

SessionKey = tuple[str, str, str, str]  # channel, conversation_key, user_id, agent_id

_INSERT = Query(
    sa.insert(S).values(
        params(
            "id", "channel", "conversation_key", "user_id", "agent_id", "parent_session_id",
            "status", "persona_version", "created_at", "updated_at",
        )
    )
)  # fmt: skip
_IS_KEY = (
    S.c.channel == sa.bindparam("channel"),
    S.c.conversation_key == sa.bindparam("conversation_key"),
    S.c.user_id == sa.bindparam("user_id"),
    S.c.agent_id == sa.bindparam("agent_id"),
    S.c.status == "active",
)
# the newest first; SQLite's idx_session_key ends in rowid, PostgreSQL's in seq: nothing to sort
ACTIVE_SESSION = sa.select(S.c.id).where(*_IS_KEY).order_by(creation_order(S).desc()).limit(1)
_FIND_ACTIVE = Query(ACTIVE_SESSION)
_SET_STATUS = Query(
    sa.update(S).values(params("status", "updated_at")).where(S.c.id == sa.bindparam("session"))
)
_RUNNING_WORKERS = RowQuery(
    sa.select(S)
    .where(S.c.status == "running", S.c.parent_session_id.is_not(None))
    .order_by(creation_order(S)),
    SessionRow,
)
_CLOSE_ACTIVE = Query(
    sa.update(S).values(status="closed", updated_at=sa.bindparam("at")).where(*_IS_KEY)
)


class SessionLog(StoreCalls):
    """Create, find and close sessions; a new session's (empty) history is cached at once.

    Written alone (`write_alone`: one process), the newest `KEPT` keys' active sessions are
    kept: a turn finds its session without a statement. Every change of a session's status
    (here, and only here) lets go of what it may have changed; a lookup that overlapped one
    keeps nothing (on PostgreSQL the calls interleave)."""

    KEPT = 10_000  # keys whose active session is kept (~300 bytes each)
    _alone: bool  # the message log's (`write_alone`)

    def _init_sessions(self) -> None:
        self._active: OrderedDict[SessionKey, str] = OrderedDict()
        self._keys: dict[str, SessionKey] = {}  # the kept sessions' keys, by session id
        self._changed = 0  # status changes begun and ended: a lookup that saw it move keeps nothing

    def _remember_empty(self, session_id: str) -> None:
        raise NotImplementedError  # the message log's, later in the MRO

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
        with self._changing(key):  # the newest active session of its key now
            session_id = await self._tx(_insert, key, parent_session_id, persona_version)
        self._remember_empty(session_id)
        return session_id

    async def set_session_status(self, session_id: str, status: str) -> None:
        check_status(status, SESSION_STATUSES, "session")
        # a kept session is its key's newest active one: only its own change changes that
        # (none is made active again but as it is created; should one be, nothing is kept)
        with self._changing(self._keys.get(session_id), everything=status == "active"):
            await self._tx(_set_status, session_id, status)

    async def close_session(self, session_id: str) -> None:
        await self.set_session_status(session_id, "closed")

    async def close_active_sessions(
        self, *, channel: str, conversation_key: str, user_id: str, agent_id: str = "default"
    ) -> int:
        """`/new`: the conversation's active sessions for this user close; how many there were."""
        key = (channel, conversation_key, user_id, agent_id)
        with self._changing(key):
            return await self._tx(_close_active, key)

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
        if self._alone:
            kept = self._active.get(key)
            if kept is not None:
                self._active.move_to_end(key)
                return kept
        changed = self._changed
        session_id, created = await self._tx(_active_session, key, persona_version)
        if created:
            self._remember_empty(session_id)
        if self._alone and changed == self._changed:
            self._active[key] = session_id
            self._keys[session_id] = key
            if len(self._active) > self.KEPT:
                del self._keys[self._active.popitem(last=False)[1]]
        return session_id

    @contextmanager
    def _changing(self, key: SessionKey | None, *, everything: bool = False) -> Iterator[None]:
        """Around a status change: what it may change (`key`'s session, or `everything`) is
        let go of as it begins and as it ends, so no lookup that overlapped it keeps anything."""
        self._change(key, everything)
        try:
            yield
        finally:
            self._change(key, everything)

    def _change(self, key: SessionKey | None, everything: bool) -> None:
        self._changed += 1
        if everything:
            self._active.clear()
            self._keys.clear()
        elif key is not None and (session_id := self._active.pop(key, None)) is not None:
            del self._keys[session_id]

    async def running_worker_sessions(self) -> list[SessionRow]:
        """Specialist sessions still `running` (left so by a process that died, in embedded
        mode), oldest first."""
        return await self._tx(_running_workers)


# -- the calls, written once for both backends -----------------------------------------
def _key(key: SessionKey) -> dict[str, str]:
    channel, conversation_key, user_id, agent_id = key
    return {
        "channel": channel,
        "conversation_key": conversation_key,
        "user_id": user_id,
        "agent_id": agent_id,
    }


async def _insert(
    tx: Tx, /, key: SessionKey, parent_session_id: str | None, persona_version: str | None
) -> str:
    session_id, stamp = uuid.uuid4().hex, now()
    await tx.execute(
        _INSERT,
        id=session_id,
        parent_session_id=parent_session_id,
        status="active",
        persona_version=persona_version,
        created_at=stamp,
        updated_at=stamp,
        **_key(key),
    )
    return session_id


async def _set_status(tx: Tx, /, session_id: str, status: str) -> None:
    await update_one(
        tx, _SET_STATUS, "session", session_id, session=session_id, status=status, updated_at=now()
    )


async def _close_active(tx: Tx, /, key: SessionKey) -> int:
    return await tx.execute(_CLOSE_ACTIVE, at=now(), **_key(key))


async def _running_workers(tx: Tx, /) -> list[SessionRow]:
    return await fetch_rows(tx, _RUNNING_WORKERS)


async def _active_session(
    tx: Tx, /, key: SessionKey, persona_version: str | None
) -> tuple[str, bool]:
    """The session id, and whether it was created now."""
    values = _key(key)
    found = await tx.fetchone(_FIND_ACTIVE, values)
    if found is None:
        async with tx.transaction():  # look again under the lock: other processes
            await tx.lock(*key)
            found = await tx.fetchone(_FIND_ACTIVE, values)
            if found is None:
                return await _insert(tx, key, None, persona_version), True
    return str(found[0]), False
