"""The sessions API's records (`adapters.api.records.SessionRecords`) on the gateway's database."""

from __future__ import annotations

import json

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert

from adapters.api.records import ApiMessage, ApiSession
from bot.storage.query import Query, params
from bot.storage.tables import api_messages as AM
from bot.storage.tables import api_sessions as AS
from bot.storage.tx import Row, StoreCalls, Tx
from content.parts import parts_from_json, parts_to_json

_COLUMNS = "session_id message_id role text status reply_to display action seq created_at parts"
_NAMES = _COLUMNS.split()
_ROW = (AM.c.position, *(AM.c[name] for name in _NAMES))
_SESSION = AM.c.session_id == sa.bindparam("session_id")
_INSERT_SESSION = Query(sa.insert(AS).values(params("id", "key_id", "user_id", "created_at")))
_GET_SESSION = Query(
    sa.select(AS.c.id, AS.c.key_id, AS.c.user_id, AS.c.created_at).where(
        AS.c.id == sa.bindparam("session_id")
    )
)
_INSERT = insert(AM).values(params(*_NAMES))
_ADD_MESSAGE = Query(
    _INSERT.on_conflict_do_update(
        index_elements=[AM.c.session_id, AM.c.message_id],
        set_={name: _INSERT.excluded[name] for name in ("text", "status", "display", "parts")},
    ).returning(*_ROW)
)
_ONE = Query(sa.select(*_ROW).where(_SESSION, AM.c.message_id == sa.bindparam("message_id")))
_REPLY = Query(
    sa.select(*_ROW)
    .where(_SESSION, AM.c.reply_to == sa.bindparam("reply_to"), AM.c.role == "assistant")
    .order_by(AM.c.position.desc())
    .limit(1)
)
_AFTER = Query(
    sa.select(*_ROW)
    .where(
        _SESSION,
        AM.c.position > sa.bindparam("position"),
        AM.c.position < sa.bindparam("upto"),  # `before`, when both are given
    )
    .order_by(AM.c.position)
    .limit(sa.bindparam("limit"))
)
# the newest `limit` before a position, read newest first and turned around
_BEFORE = Query(
    sa.select(*_ROW)
    .where(_SESSION, AM.c.position < sa.bindparam("position"))
    .order_by(AM.c.position.desc())
    .limit(sa.bindparam("limit"))
)


def _message(row: Row) -> ApiMessage:
    (
        position,
        session_id,
        message_id,
        role,
        text,
        status,
        reply_to,
        display,
        action,
        seq,
        at,
        parts,
    ) = row
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
        parts=parts_from_json(parts),
    )


class ApiRecords(StoreCalls):
    """API sessions and their transcript: one short statement per call."""

    async def create_api_session(self, session: ApiSession) -> None:
        await self._tx(_create_session, session)

    async def api_session(self, session_id: str) -> ApiSession | None:
        return await self._tx(_session, session_id)

    async def add_api_message(self, message: ApiMessage) -> ApiMessage:
        """Adds the message, or updates the text, status, display and parts of the one with its id;
        returns it as kept."""
        return await self._tx(_add_message, message)

    async def api_message(self, session_id: str, message_id: str) -> ApiMessage | None:
        return await self._tx(_one, _ONE, session_id=session_id, message_id=message_id)

    async def api_reply(self, session_id: str, reply_to: str) -> ApiMessage | None:
        return await self._tx(_one, _REPLY, session_id=session_id, reply_to=reply_to)

    async def api_messages(
        self, session_id: str, *, limit: int, before: int | None = None, after: int | None = None
    ) -> list[ApiMessage]:
        newest = before if before is not None else 2**63 - 1
        if after is not None:
            return await self._tx(
                _many, _AFTER, session_id=session_id, position=after, upto=newest, limit=limit
            )
        rows = await self._tx(_many, _BEFORE, session_id=session_id, position=newest, limit=limit)
        return rows[::-1]


async def _create_session(tx: Tx, /, s: ApiSession) -> None:
    await tx.execute(
        _INSERT_SESSION, id=s.id, key_id=s.key_id, user_id=s.user_id, created_at=s.created_at
    )


async def _session(tx: Tx, /, session_id: str) -> ApiSession | None:
    row = await tx.fetchone(_GET_SESSION, session_id=session_id)
    return None if row is None else ApiSession(*row)


async def _add_message(tx: Tx, /, m: ApiMessage) -> ApiMessage:
    display = json.dumps([dict(hint) for hint in m.display]) if m.display else None
    action = json.dumps(dict(m.action)) if m.action is not None else None
    kept = await tx.fetchone(
        _ADD_MESSAGE,
        session_id=m.session_id,
        message_id=m.message_id,
        role=m.role,
        text=m.text,
        status=m.status,
        reply_to=m.reply_to,
        display=display,
        action=action,
        seq=m.seq,
        created_at=m.created_at,
        parts=parts_to_json(m.parts),
    )
    assert kept is not None  # RETURNING gives the row as kept
    return _message(kept)


async def _one(tx: Tx, query: Query, /, **values: str) -> ApiMessage | None:
    row = await tx.fetchone(query, **values)
    return None if row is None else _message(row)


async def _many(tx: Tx, query: Query, /, **values: str | int) -> list[ApiMessage]:
    return [_message(row) for row in await tx.fetch(query, **values)]
