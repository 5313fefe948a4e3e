"""Read-only views for admins and reports: raw rows of sessions, messages, audit and usage."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql.expression import BindParameter

from bot.storage.query import Query
from bot.storage.rows import TurnUsage
from bot.storage.tables import audit_logs, chat_sessions, creation_order, messages, turns, usage
from bot.storage.tx import StoreCalls, Tx, fetch_dicts

S, U = chat_sessions, usage
_SESSION_ID: BindParameter[str] = sa.bindparam("session_id")
_ROOT = S.c.parent_session_id.is_(None)
_NEWEST_FIRST = (S.c.updated_at.desc(), creation_order(S).desc())
_GET_SESSION = Query(sa.select(S).where(S.c.id == _SESSION_ID))
_CHILDREN = Query(
    sa.select(S).where(S.c.parent_session_id == _SESSION_ID).order_by(creation_order(S))
)
_AUDIT = Query(
    sa.select(audit_logs).where(audit_logs.c.session_id == _SESSION_ID).order_by(audit_logs.c.id)
)
_MESSAGES = Query(
    sa.select(messages).where(messages.c.session_id == _SESSION_ID).order_by(messages.c.id)
)
_TURNS = Query(
    sa.select(turns)
    .where(turns.c.session_id == _SESSION_ID)
    .order_by(turns.c.created_at, creation_order(turns))
)
_USAGE = Query(sa.select(U).where(U.c.session_id == _SESSION_ID).order_by(U.c.id))
_FAILED_TURNS = (
    sa.select(sa.func.count())
    .where(turns.c.session_id == S.c.id, turns.c.status == "failed")
    .scalar_subquery()
    .label("failed_turns")
)
_RECENT = {
    root_only: Query(
        sa.select(S)
        .where(_ROOT if root_only else sa.true())
        .order_by(*_NEWEST_FIRST)
        .limit(sa.bindparam("limit"))
    )
    for root_only in (True, False)
}
_FIND = Query(
    sa.select(S).where(S.c.id.like(sa.bindparam("pattern"))).order_by(creation_order(S)).limit(10)
)
_TURN_USAGE = Query(
    sa.select(
        sa.func.count().label("model_calls"),
        sa.func.coalesce(sa.func.sum(U.c.input_tokens), 0).label("input_tokens"),
        sa.func.coalesce(sa.func.sum(U.c.output_tokens), 0).label("output_tokens"),
    ).where(U.c.turn_id == sa.bindparam("turn_id"))
)
_DAY = sa.func.substr(U.c.created_at, 1, 10).label("day")
_GROUPS = (
    _DAY,
    sa.func.coalesce(S.c.channel, "-").label("channel"),
    sa.func.coalesce(S.c.user_id, "-").label("user_id"),
    sa.func.coalesce(U.c.model, "-").label("model"),
)
_USAGE_TOTALS = Query(
    sa.select(
        *_GROUPS,
        sa.func.count().label("calls"),
        sa.func.coalesce(sa.func.sum(U.c.input_tokens), 0).label("input_tokens"),
        sa.func.coalesce(sa.func.sum(U.c.output_tokens), 0).label("output_tokens"),
    )
    .select_from(U.outerjoin(S, S.c.id == U.c.session_id))
    .where(U.c.created_at >= sa.bindparam("since"))
    .group_by(*(sa.literal_column(str(n)) for n in range(1, len(_GROUPS) + 1)))  # by position
)
_CONVERSATIONS: dict[tuple[bool, bool], Query] = {}  # by whether channel, user_id are given


def _conversations(by_channel: bool, by_user: bool) -> Query:
    query = _CONVERSATIONS.get((by_channel, by_user))
    if query is None:
        where: list[sa.ColumnElement[bool]] = [_ROOT]
        if by_channel:
            where.append(S.c.channel == sa.bindparam("channel"))
        if by_user:
            where.append(S.c.user_id == sa.bindparam("user_id"))
        statement = sa.select(S, _FAILED_TURNS).where(*where).order_by(*_NEWEST_FIRST)
        query = Query(statement.limit(sa.bindparam("limit")))
        _CONVERSATIONS[by_channel, by_user] = query
    return query


class AdminViews(StoreCalls):
    """Raw rows, as dicts, for the sessions view, the CLI and tests."""

    async def get_session(self, session_id: str) -> dict[str, Any] | None:
        rows = await self._tx(fetch_dicts, _GET_SESSION, session_id=session_id)
        return rows[0] if rows else None

    async def child_sessions(self, session_id: str) -> list[dict[str, Any]]:
        return await self._tx(fetch_dicts, _CHILDREN, session_id=session_id)

    async def audit_for_session(self, session_id: str) -> list[dict[str, Any]]:
        return await self._tx(fetch_dicts, _AUDIT, session_id=session_id)

    async def messages_for_session(self, session_id: str) -> list[dict[str, Any]]:
        return await self._tx(fetch_dicts, _MESSAGES, session_id=session_id)

    async def turns_for_session(self, session_id: str) -> list[dict[str, Any]]:
        return await self._tx(fetch_dicts, _TURNS, session_id=session_id)

    async def conversations(
        self, *, channel: str | None = None, user_id: str | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        """Coordinator sessions, newest first, with how many of their turns failed."""
        query = _conversations(bool(channel), bool(user_id))
        return await self._tx(fetch_dicts, query, channel=channel, user_id=user_id, limit=limit)

    async def recent_sessions(
        self, *, limit: int = 20, root_only: bool = True
    ) -> list[dict[str, Any]]:
        """The newest sessions first (coordinator sessions only, unless `root_only` is False)."""
        return await self._tx(fetch_dicts, _RECENT[root_only], limit=limit)

    async def find_sessions(self, prefix: str) -> list[dict[str, Any]]:
        """Sessions whose id starts with `prefix` (admins type short ids)."""
        pattern = prefix.replace("%", "").replace("_", "") + "%"
        return await self._tx(fetch_dicts, _FIND, pattern=pattern)

    async def usage_for_session(self, session_id: str) -> list[dict[str, Any]]:
        return await self._tx(fetch_dicts, _USAGE, session_id=session_id)

    async def turn_usage(self, turn_id: str) -> TurnUsage:
        """A turn's totals: model calls, input and output tokens (all providers of a fallback)."""
        return await self._tx(_turn_usage, turn_id)

    async def usage_totals(self, since: str | None = None) -> list[dict[str, Any]]:
        """Model calls and tokens per day (UTC), channel, user and model, since a date or ever."""
        return await self._tx(fetch_dicts, _USAGE_TOTALS, since=since or "")


async def _turn_usage(tx: Tx, /, turn_id: str) -> TurnUsage:
    row = await tx.fetchone(_TURN_USAGE, turn_id=turn_id)
    assert row is not None  # an aggregate: always one row
    return TurnUsage(*row)
