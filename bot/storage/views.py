"""Read-only views for admins and reports: sessions, messages, turns, audit and usage, as records."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.sql.expression import BindParameter

from bot.storage.handoffs import like_pattern
from bot.storage.query import Query
from bot.storage.rows import (
    AuditRow,
    ConversationRow,
    MessageRow,
    ModelCallRow,
    SessionRow,
    TurnRow,
    TurnUsage,
    UsageTotalRow,
)
from bot.storage.tables import audit_logs, chat_sessions, creation_order, messages, turns, usage
from bot.storage.turns import fetch_turns
from bot.storage.tx import RowQuery, StoreCalls, Tx, fetch_rows

S, U = chat_sessions, usage
_SESSION_ID: BindParameter[str] = sa.bindparam("session_id")
_ROOT = S.c.parent_session_id.is_(None)
_NEWEST_FIRST = (S.c.updated_at.desc(), creation_order(S).desc())
_GET_SESSION = RowQuery(sa.select(S).where(S.c.id == _SESSION_ID), SessionRow)
_CHILDREN = RowQuery(
    sa.select(S).where(S.c.parent_session_id == _SESSION_ID).order_by(creation_order(S)),
    SessionRow,
)
_AUDIT = RowQuery(
    sa.select(audit_logs).where(audit_logs.c.session_id == _SESSION_ID).order_by(audit_logs.c.id),
    AuditRow,
)
_MESSAGES = RowQuery(
    sa.select(messages).where(messages.c.session_id == _SESSION_ID).order_by(messages.c.id),
    MessageRow,
)
_TURNS = Query(
    sa.select(turns)
    .where(turns.c.session_id == _SESSION_ID)
    .order_by(turns.c.created_at, creation_order(turns))
)
_USAGE = RowQuery(sa.select(U).where(U.c.session_id == _SESSION_ID).order_by(U.c.id), ModelCallRow)
_FAILED_TURNS = (
    sa.select(sa.func.count())
    .where(turns.c.session_id == S.c.id, turns.c.status == "failed")
    .scalar_subquery()
    .label("failed_turns")
)
_RECENT = {
    root_only: RowQuery(
        sa.select(S)
        .where(_ROOT if root_only else sa.true())
        .order_by(*_NEWEST_FIRST)
        .limit(sa.bindparam("limit")),
        SessionRow,
    )
    for root_only in (True, False)
}
_FIND = RowQuery(
    sa.select(S).where(S.c.id.like(sa.bindparam("pattern"))).order_by(creation_order(S)).limit(10),
    SessionRow,
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
_USAGE_TOTALS = RowQuery(
    sa.select(
        *_GROUPS,
        sa.func.count().label("calls"),
        sa.func.coalesce(sa.func.sum(U.c.input_tokens), 0).label("input_tokens"),
        sa.func.coalesce(sa.func.sum(U.c.output_tokens), 0).label("output_tokens"),
    )
    .select_from(U.outerjoin(S, S.c.id == U.c.session_id))
    .where(U.c.created_at >= sa.bindparam("since"))
    .group_by(*(sa.literal_column(str(n)) for n in range(1, len(_GROUPS) + 1))),  # by position
    UsageTotalRow,
)
# by whether channel, user_id, a search are given
_CONVERSATIONS: dict[tuple[bool, bool, bool], RowQuery[ConversationRow]] = {}


def _conversations(by_channel: bool, by_user: bool, searched: bool) -> RowQuery[ConversationRow]:
    query = _CONVERSATIONS.get((by_channel, by_user, searched))
    if query is None:
        where: list[sa.ColumnElement[bool]] = [_ROOT]
        if by_channel:
            where.append(S.c.channel == sa.bindparam("channel"))
        if by_user:
            where.append(S.c.user_id == sa.bindparam("user_id"))
        if searched:
            pattern: BindParameter[str] = sa.bindparam("pattern")
            where.append(
                sa.or_(
                    *(
                        sa.func.lower(sa.func.coalesce(column, "")).like(pattern)
                        for column in (S.c.conversation_key, S.c.user_id, S.c.title, S.c.id)
                    )
                )
            )
        statement = sa.select(S, _FAILED_TURNS).where(*where).order_by(*_NEWEST_FIRST)
        statement = statement.limit(sa.bindparam("limit")).offset(sa.bindparam("offset"))
        query = RowQuery(statement, ConversationRow)
        _CONVERSATIONS[by_channel, by_user, searched] = query
    return query


class AdminViews(StoreCalls):
    """The rows the sessions view, the CLI and tests read, as records."""

    async def get_session(self, session_id: str) -> SessionRow | None:
        rows = await self._tx(fetch_rows, _GET_SESSION, session_id=session_id)
        return rows[0] if rows else None

    async def child_sessions(self, session_id: str) -> list[SessionRow]:
        return await self._tx(fetch_rows, _CHILDREN, session_id=session_id)

    async def audit_for_session(self, session_id: str) -> list[AuditRow]:
        return await self._tx(fetch_rows, _AUDIT, session_id=session_id)

    async def messages_for_session(self, session_id: str) -> list[MessageRow]:
        return await self._tx(fetch_rows, _MESSAGES, session_id=session_id)

    async def turns_for_session(self, session_id: str) -> list[TurnRow]:
        return await self._tx(fetch_turns, _TURNS, session_id=session_id)

    async def conversations(
        self,
        *,
        channel: str | None = None,
        user_id: str | None = None,
        limit: int = 50,
        search: str | None = None,
        offset: int = 0,
    ) -> list[ConversationRow]:
        """Coordinator sessions, newest first, with how many of their turns failed; `search`:
        a substring of the conversation, the user, the title or the session id (any case)."""
        searched = bool(search and search.strip())
        query = _conversations(bool(channel), bool(user_id), searched)
        named = {"pattern": like_pattern(search or "")} if searched else {}
        return await self._tx(
            fetch_rows, query, channel=channel, user_id=user_id, limit=limit, offset=offset, **named
        )

    async def recent_sessions(self, *, limit: int = 20, root_only: bool = True) -> list[SessionRow]:
        """The newest sessions first (coordinator sessions only, unless `root_only` is False)."""
        return await self._tx(fetch_rows, _RECENT[root_only], limit=limit)

    async def find_sessions(self, prefix: str) -> list[SessionRow]:
        """Sessions whose id starts with `prefix` (admins type short ids)."""
        pattern = prefix.replace("%", "").replace("_", "") + "%"
        return await self._tx(fetch_rows, _FIND, pattern=pattern)

    async def usage_for_session(self, session_id: str) -> list[ModelCallRow]:
        return await self._tx(fetch_rows, _USAGE, session_id=session_id)

    async def turn_usage(self, turn_id: str) -> TurnUsage:
        """A turn's totals: model calls, input and output tokens (all providers of a fallback)."""
        return await self._tx(_turn_usage, turn_id)

    async def usage_totals(self, since: str | None = None) -> list[UsageTotalRow]:
        """Model calls and tokens per day (UTC), channel, user and model, since a date or ever."""
        return await self._tx(fetch_rows, _USAGE_TOTALS, since=since or "")


async def _turn_usage(tx: Tx, /, turn_id: str) -> TurnUsage:
    row = await tx.fetchone(_TURN_USAGE, turn_id=turn_id)
    assert row is not None  # an aggregate: always one row
    return TurnUsage(*row)
