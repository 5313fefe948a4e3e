"""Handoff records (the `handoffs` table) and their audit trail (`handoff_events`).

The conversation's state (bot/pipeline/conversation_state.py) decides who holds a conversation,
atomically; these rows are what operators list, search and read, and how a reply in an operator
thread finds its conversation. A row is written whole (an upsert) by whoever won the state's
compare-and-set, so two writers never interleave on one row.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.sql.expression import BindParameter

from bot.storage.query import Query, params
from bot.storage.rows import HandoffEventRow, HandoffRow
from bot.storage.tables import handoff_events as E
from bot.storage.tables import handoffs as H
from bot.storage.tx import RowQuery, StoreCalls, Tx, fetch_rows

_FIELDS = [column.name for column in H.columns]
_INSERT = insert(H).values(params(*_FIELDS))
_SAVE = Query(
    _INSERT.on_conflict_do_update(
        index_elements=[H.c.id],
        set_={name: getattr(_INSERT.excluded, name) for name in _FIELDS if name != "id"},
    )
)
_GET = RowQuery(sa.select(H).where(H.c.id == sa.bindparam("id")), HandoffRow)
_BY_THREAD = RowQuery(
    sa.select(H).where(H.c.thread == sa.bindparam("thread")).order_by(H.c.requested_at.desc()),
    HandoffRow,
)
_AUDIT = Query(sa.insert(E).values(params("handoff_id", "at", "actor", "action", "detail")))
_EVENTS = RowQuery(
    sa.select(E).where(E.c.handoff_id == sa.bindparam("handoff_id")).order_by(E.c.id),
    HandoffEventRow,
)
_LISTS: dict[tuple[int, bool], RowQuery[HandoffRow]] = {}  # by (statuses, searched)


def _listing(statuses: int, searched: bool) -> RowQuery[HandoffRow]:
    query = _LISTS.get((statuses, searched))
    if query is None:
        where: list[sa.ColumnElement[bool]] = []
        if statuses:
            where.append(H.c.status.in_([sa.bindparam(f"s{i}") for i in range(statuses)]))
        if searched:
            pattern: BindParameter[str] = sa.bindparam("pattern")
            where.append(
                sa.or_(
                    *(
                        sa.func.lower(column).like(pattern)
                        for column in (
                            H.c.conversation_key,
                            H.c.user_id,
                            sa.func.coalesce(H.c.user_name, ""),
                            H.c.reason,
                            H.c.summary,
                        )
                    )
                )
            )
        statement = (
            sa.select(H)
            .where(*where)
            .order_by(H.c.requested_at.desc(), H.c.id)
            .limit(sa.bindparam("limit"))
            .offset(sa.bindparam("offset"))
        )
        query = _LISTS[statuses, searched] = RowQuery(statement, HandoffRow)
    return query


def like_pattern(search: str) -> str:
    """`search` as a case-insensitive substring pattern, its own wildcards taken literally."""
    cleaned = search.strip().lower().replace("%", "").replace("_", "")
    return f"%{cleaned}%"


class HandoffTable(StoreCalls):
    """`HandoffRecords` (bot/storage/roles.py): one statement a call."""

    async def save_handoff(self, row: HandoffRow) -> None:
        await self._tx(_save, row)

    async def get_handoff(self, handoff_id: str) -> HandoffRow | None:
        rows = await self._tx(fetch_rows, _GET, id=handoff_id)
        return rows[0] if rows else None

    async def handoff_by_thread(self, thread: str) -> HandoffRow | None:
        """The newest handoff whose operator thread is `thread`."""
        rows = await self._tx(fetch_rows, _BY_THREAD, thread=thread)
        return rows[0] if rows else None

    async def list_handoffs(
        self,
        *,
        statuses: Sequence[str] = (),
        search: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[HandoffRow]:
        """Newest first; `statuses` empty: all; `search`: a substring of the conversation,
        the user, the reason or the summary (any case)."""
        query = _listing(len(statuses), bool(search and search.strip()))
        named = {f"s{i}": status for i, status in enumerate(statuses)}
        if search and search.strip():
            named["pattern"] = like_pattern(search)
        return await self._tx(fetch_rows, query, limit=limit, offset=offset, **named)

    async def audit_handoff(
        self, handoff_id: str, *, at: float, actor: str, action: str, detail: str = ""
    ) -> None:
        await self._tx(_audit, handoff_id, at, actor, action, detail)

    async def handoff_events(self, handoff_id: str) -> list[HandoffEventRow]:
        return await self._tx(fetch_rows, _EVENTS, handoff_id=handoff_id)


async def _save(tx: Tx, /, row: HandoffRow) -> None:
    await tx.execute(_SAVE, **{name: getattr(row, name) for name in _FIELDS})


async def _audit(
    tx: Tx, /, handoff_id: str, at: float, actor: str, action: str, detail: str
) -> None:
    values = {"handoff_id": handoff_id, "at": at, "actor": actor, "action": action}
    await tx.execute(_AUDIT, detail=detail, **values)
