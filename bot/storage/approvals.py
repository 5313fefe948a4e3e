"""Approvals (the `approvals` and `approval_grants` tables): asked once, decided once, used once.

Every change is one conditional UPDATE, so whichever process (or button press) comes first
wins and a second one changes nothing: a replayed press, two approvers at once, the expiry
sweep of two processes racing a late press.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import astuple
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert

from bot.storage.query import Query, params
from bot.storage.rows import ApprovalRow
from bot.storage.tables import approval_grants as G
from bot.storage.tables import approvals as A
from bot.storage.tables import turns as T
from bot.storage.tx import RowQuery, StoreCalls, Tx, fetch_rows

_COLUMNS = [c.name for c in A.columns]
_CREATE = Query(
    insert(A)
    .values(params(*_COLUMNS))
    .on_conflict_do_nothing(index_elements=[A.c.turn_id, A.c.call_id])
)
_BY_ID = RowQuery(sa.select(A).where(A.c.id == sa.bindparam("approval_id")), ApprovalRow)
_BY_CALL = RowQuery(
    sa.select(A).where(
        A.c.turn_id == sa.bindparam("turn_id"), A.c.call_id == sa.bindparam("call_id")
    ),
    ApprovalRow,
)
_DECIDE = Query(
    sa.update(A)
    .values(params("status", "decision", "decided_by", "decided_at"))
    .where(A.c.id == sa.bindparam("approval_id"), A.c.status == "pending")
)
_USE = Query(
    sa.update(A)
    .values(status="used")
    .where(A.c.id == sa.bindparam("approval_id"), A.c.status == "allowed")
)
_NOTICE = Query(sa.update(A).values(params("notice")).where(A.c.id == sa.bindparam("approval_id")))
_PENDING_IN = RowQuery(
    sa.select(A)
    .where(A.c.conversation_key == sa.bindparam("key"), A.c.status == "pending")
    .order_by(A.c.created_at),
    ApprovalRow,
)
_EXPIRED = RowQuery(
    sa.select(A)
    .where(A.c.status == "pending", A.c.expires_at <= sa.bindparam("now"))
    .order_by(A.c.expires_at)
    .limit(100),
    ApprovalRow,
)
# Decided, but its turn still waits: the process that decided died before queueing the turn
_UNRESUMED = RowQuery(
    sa.select(A)
    .join(T, T.c.id == A.c.turn_id)
    .where(
        A.c.status.in_(("allowed", "denied", "expired", "dismissed")),
        A.c.decided_at <= sa.bindparam("before"),
        T.c.status == "waiting",
    )
    .order_by(A.c.decided_at)
    .limit(100),
    ApprovalRow,
)
_NEXT_EXPIRY = Query(sa.select(sa.func.min(A.c.expires_at)).where(A.c.status == "pending"))
_PENDING_COUNTS = Query(
    sa.select(A.c.conversation_key, sa.func.count())
    .where(A.c.status == "pending")
    .group_by(A.c.conversation_key)
)
_GRANT = Query(
    insert(G)
    .values(params("conversation_key", "tool_name", "target", "granted_by", "granted_at"))
    .on_conflict_do_nothing(index_elements=[G.c.conversation_key, G.c.tool_name, G.c.target])
)
_GRANTED = Query(
    sa.select(G.c.granted_by).where(
        G.c.conversation_key == sa.bindparam("key"),
        G.c.tool_name == sa.bindparam("tool_name"),
        G.c.target == sa.bindparam("target"),
    )
)


class ApprovalTable(StoreCalls):
    """`ApprovalRecords` (bot/storage/roles.py): one short statement or transaction a call.

    Written alone (`write_alone`: the only writer of its conversations), the store counts the
    pending requests of each conversation, read once, then kept by its own creates and
    decisions: a turn's withdrawal of its user's open questions (every turn asks) reads the
    table only where one is pending. A count is raised before a create and lowered after a
    decision, so a read that overlaps either asks the table; a first read that overlapped one
    is not kept (on PostgreSQL the calls interleave)."""

    _alone: bool  # the message log's (`write_alone`)
    _pending: Counter[str] | None = None  # alone: pending requests by conversation, once read
    _approval_changes = 0  # creates and decisions begun and ended

    async def create_approval(self, row: ApprovalRow) -> ApprovalRow:
        """Records the request; the one already recorded for the same turn and call, if any
        (a turn resumed after a crash asks again about the call it was pausing on)."""
        self._count(row.conversation_key, 1)  # counted until it is known to be no new one
        self._approval_changes += 1
        try:
            found = await self._tx(_create, row)
        finally:
            self._approval_changes += 1
        if found.id != row.id:  # the one recorded before: counted when it was
            self._count(row.conversation_key, -1)
        return found

    async def approval(self, approval_id: str) -> ApprovalRow | None:
        return await self._tx(_one, _BY_ID, approval_id=approval_id)

    async def approval_for_call(self, turn_id: str, call_id: str) -> ApprovalRow | None:
        return await self._tx(_one, _BY_CALL, turn_id=turn_id, call_id=call_id)

    async def decide_approval(
        self, approval_id: str, *, status: str, decision: str, by: str, at: float
    ) -> ApprovalRow | None:
        """Decides a pending request; the decided row, or None when it was decided already
        (by anyone: used once)."""
        self._approval_changes += 1
        try:
            won = await self._tx(_decide, approval_id, status, decision, by, at)
        finally:
            self._approval_changes += 1
        if won is not None:  # it was pending
            self._count(won.conversation_key, -1)
        return won

    async def use_approval(self, approval_id: str) -> bool:
        """`allowed` -> `used`, right before the call runs; False: it was used already."""
        return await self._tx(_execute, _USE, approval_id=approval_id) == 1

    async def set_approval_notice(self, approval_id: str, notice: str) -> None:
        await self._tx(_execute, _NOTICE, approval_id=approval_id, notice=notice)

    async def pending_approvals(self, conversation_key: str) -> list[ApprovalRow]:
        if self._alone:
            if self._pending is None:
                changes = self._approval_changes
                counts = await self._tx(_rows, _PENDING_COUNTS)
                if changes == self._approval_changes:
                    self._pending = Counter({key: n for key, n in counts})
            if self._pending is not None and not self._pending.get(conversation_key):
                return []
        return await self._tx(fetch_rows, _PENDING_IN, key=conversation_key)

    def _count(self, conversation_key: str, change: int) -> None:
        if self._pending is not None:
            left = self._pending[conversation_key] + change
            if left > 0:
                self._pending[conversation_key] = left
            else:
                self._pending.pop(conversation_key, None)

    async def expired_approvals(self, now: float) -> list[ApprovalRow]:
        """Pending requests whose time is up (the oldest 100)."""
        return await self._tx(fetch_rows, _EXPIRED, now=now)

    async def unresumed_approvals(self, before: float) -> list[ApprovalRow]:
        """Requests decided before `before` whose turn still waits (whoever decided died
        before queueing the turn): their turns are to be queued again."""
        return await self._tx(fetch_rows, _UNRESUMED, before=before)

    async def next_approval_expiry(self) -> float | None:
        """When the next pending request expires (unix seconds); None: none is pending."""
        return await self._tx(_scalar, _NEXT_EXPIRY)

    async def grant_approval(
        self, conversation_key: str, tool_name: str, target: str, *, by: str, at: float
    ) -> None:
        """ "Always allow" `tool_name` on `target` in this conversation."""
        values = {"key": conversation_key, "tool": tool_name, "target": target, "by": by}
        await self._tx(_grant, values, at)

    async def approval_granted(self, conversation_key: str, tool_name: str, target: str) -> bool:
        found = await self._tx(
            _scalar, _GRANTED, key=conversation_key, tool_name=tool_name, target=target
        )
        return found is not None


async def _create(tx: Tx, /, row: ApprovalRow) -> ApprovalRow:
    await tx.execute(_CREATE, **dict(zip(_COLUMNS, astuple(row), strict=True)))
    found = await _one(tx, _BY_CALL, turn_id=row.turn_id, call_id=row.call_id)
    assert found is not None  # inserted, or there before
    return found


async def _one(tx: Tx, rows: RowQuery[ApprovalRow], /, **values: Any) -> ApprovalRow | None:
    found = await fetch_rows(tx, rows, **values)
    return found[0] if found else None


async def _decide(
    tx: Tx, /, approval_id: str, status: str, decision: str, by: str, at: float
) -> ApprovalRow | None:
    async with tx.transaction():
        changed = await tx.execute(
            _DECIDE,
            approval_id=approval_id,
            status=status,
            decision=decision,
            decided_by=by,
            decided_at=at,
        )
        if changed == 0:
            return None
        return await _one(tx, _BY_ID, approval_id=approval_id)


async def _execute(tx: Tx, query: Query, /, **values: Any) -> int:
    return await tx.execute(query, **values)


async def _rows(tx: Tx, query: Query, /) -> list[Any]:
    return await tx.fetch(query)


async def _scalar(tx: Tx, query: Query, /, **values: Any) -> Any:
    row = await tx.fetchone(query, **values)
    return None if row is None else row[0]


async def _grant(tx: Tx, /, values: dict[str, str], at: float) -> None:
    await tx.execute(
        _GRANT,
        conversation_key=values["key"],
        tool_name=values["tool"],
        target=values["target"],
        granted_by=values["by"],
        granted_at=at,
    )
