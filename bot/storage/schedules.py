"""Scheduled messages (the `schedules` table): added within limits, claimed with a fence.

Exactly one process fires each occurrence: `claim_due_schedules` is one UPDATE that moves the
`fence` of each due, unleased row on and leases it (SQLite: the statement holds the one write
lock; PostgreSQL: `FOR UPDATE SKIP LOCKED`, and the guard re-checked on the locked row). What
the claim then did is recorded only while its fence is still the row's (`WHERE fence = ...`):
a process that lost its lease (it stalled, another took over) can no longer move the row on.
Times are compared on the database's clock, so hosts sharing it agree on what is due.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import sqlalchemy as sa

from bot.storage.query import Query, params
from bot.storage.tables import database_now
from bot.storage.tables import schedules as S
from bot.storage.tx import RowQuery, StoreCalls, Tx, fetch_rows

Refusal = Literal["user", "conversation"]
ACTIVE = "active"


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    id: str
    conversation_key: str
    chat: str  # JSON chat record
    user_id: str
    kind: str  # text | task
    body: str
    spec: str
    timezone: str
    missed: str  # late | skip
    status: str  # active | done | cancelled | disabled
    next_at: float | None
    occurrence: int
    fence: int
    lease_until: float | None
    sending: str | None  # JSON: the occurrence in flight and what is known of its send
    failures: int
    note: str | None
    language: str | None
    created_at: float
    fired_at: float | None


@dataclass(frozen=True, slots=True)
class Settle:
    """What a claim of one row did: its next due time (None: finished), status and counts."""

    id: str
    fence: int
    next_at: float | None
    status: str
    occurrence: int
    failures: int = 0
    note: str | None = None
    fired_at: float | None = None


_NOW = database_now()
_FREE = sa.or_(S.c.lease_until.is_(None), S.c.lease_until < _NOW)
_DUE = sa.and_(S.c.status == ACTIVE, S.c.next_at <= _NOW, _FREE)
_COLUMNS = [c.name for c in S.columns]
_ADD = Query(sa.insert(S).values(params(*_COLUMNS)))
_COUNT_USER = Query(
    sa.select(sa.func.count()).where(S.c.user_id == sa.bindparam("user_id"), S.c.status == ACTIVE)
)
_COUNT_CONVERSATION = Query(
    sa.select(sa.func.count()).where(
        S.c.conversation_key == sa.bindparam("conversation_key"), S.c.status == ACTIVE
    )
)
_BY_CONVERSATION = RowQuery(
    sa.select(S)
    .where(S.c.conversation_key == sa.bindparam("conversation_key"), S.c.status == ACTIVE)
    .order_by(S.c.next_at),
    ScheduleRow,
)
_RECENT = RowQuery(
    sa.select(S).order_by(S.c.created_at.desc()).limit(sa.bindparam("limit")), ScheduleRow
)
_ONE = RowQuery(sa.select(S).where(S.c.id == sa.bindparam("id")), ScheduleRow)
_CANCEL = Query(
    sa.update(S)
    .where(S.c.id == sa.bindparam("id"), S.c.status == ACTIVE)
    .values(status="cancelled", next_at=None, note=sa.bindparam("note"))
)
_CLAIM = RowQuery(
    sa.update(S)
    .where(
        S.c.id.in_(
            sa.select(S.c.id)
            .where(_DUE)
            .order_by(S.c.next_at)
            .limit(sa.bindparam("limit"))
            .with_for_update(skip_locked=True)
        ),
        _DUE,
    )
    .values(fence=S.c.fence + 1, lease_until=_NOW + sa.bindparam("lease_s"))
    .returning(*S.c),
    ScheduleRow,
)
_FENCED = sa.and_(S.c.id == sa.bindparam("id"), S.c.fence == sa.bindparam("fence"))
_SENDING = Query(sa.update(S).where(_FENCED).values(sending=sa.bindparam("sending")))
_EXTEND = Query(sa.update(S).where(_FENCED).values(lease_until=_NOW + sa.bindparam("lease_s")))
_SETTLE = Query(
    sa.update(S)
    .where(_FENCED, S.c.status == ACTIVE)
    .values(
        {
            **params("next_at", "status", "occurrence", "failures", "note", "fired_at"),
            "lease_until": None,
            "sending": None,
        }
    )
)
_NEXT_DUE = Query(sa.select(sa.func.min(S.c.next_at) - _NOW).where(S.c.status == ACTIVE, _FREE))


class ScheduleTable(StoreCalls):
    """`ScheduleRecords` (bot/storage/roles.py)."""

    async def add_schedule(
        self, row: ScheduleRow, *, max_per_user: int, max_per_conversation: int
    ) -> Refusal | None:
        """Adds `row` unless its user or conversation has its limit of active schedules
        already: then which limit, and nothing added (checked and added in one transaction)."""
        return await self._tx(_add, row, max_per_user, max_per_conversation)

    async def get_schedule(self, schedule_id: str) -> ScheduleRow | None:
        return await self._tx(_one, schedule_id)

    async def conversation_schedules(self, conversation_key: str) -> list[ScheduleRow]:
        """The conversation's active schedules, the next due first."""
        return await self._tx(_by_conversation, conversation_key)

    async def recent_schedules(self, limit: int = 100) -> list[ScheduleRow]:
        """The newest schedules of any status (the admin view)."""
        return await self._tx(_recent, limit)

    async def cancel_schedule(self, schedule_id: str, note: str) -> bool:
        """True if it was active (it is cancelled now); a fired occurrence in flight is not
        recalled, and no later one is fired: settling an occurrence needs an active row."""
        return await self._tx(_cancel, schedule_id, note)

    async def claim_due_schedules(self, limit: int, lease_s: float) -> list[ScheduleRow]:
        """Up to `limit` due rows no live lease holds, each leased to the caller for `lease_s`
        with its fence moved on (the returned rows carry the new fence)."""
        return await self._tx(_claim, limit, lease_s)

    async def schedules_sending(self, marks: Sequence[tuple[str, int, str]]) -> set[str]:
        """Records each (id, fence, sending: the occurrence in flight) in one transaction;
        the ids whose fence still held (the others were taken over: nothing written)."""
        return await self._tx(_each_fenced, _SENDING, [(i, f, {"sending": m}) for i, f, m in marks])

    async def extend_schedule_leases(
        self, held: Sequence[tuple[str, int]], lease_s: float
    ) -> set[str]:
        """The leases of (id, fence) extended by `lease_s`; the ids whose fence still held."""
        return await self._tx(
            _each_fenced, _EXTEND, [(i, f, {"lease_s": lease_s}) for i, f in held]
        )

    async def settle_schedules(self, settles: Sequence[Settle]) -> set[str]:
        """What each claim did, in one transaction: the next due time (None: finished) and
        status, the lease let go. The ids settled; a row whose fence moved on (another
        process took it over) or that was cancelled meanwhile is left as it is."""
        return await self._tx(
            _each_fenced, _SETTLE, [(x.id, x.fence, _settle_values(x)) for x in settles]
        )

    async def next_schedule_in(self) -> float | None:
        """Seconds from now (the database's clock) to the next due schedule no lease holds."""
        return await self._tx(_next_due)


async def _add(
    tx: Tx, /, row: ScheduleRow, max_per_user: int, max_per_conversation: int
) -> Refusal | None:
    async with tx.transaction():
        await tx.lock("schedules", row.user_id)
        await tx.lock("schedules", row.conversation_key)
        user = await tx.fetchone(_COUNT_USER, user_id=row.user_id)
        if user is not None and user[0] >= max_per_user:
            return "user"
        here = await tx.fetchone(_COUNT_CONVERSATION, conversation_key=row.conversation_key)
        if here is not None and here[0] >= max_per_conversation:
            return "conversation"
        await tx.execute(_ADD, {name: getattr(row, name) for name in _COLUMNS})
    return None


async def _one(tx: Tx, /, schedule_id: str) -> ScheduleRow | None:
    found = await fetch_rows(tx, _ONE, id=schedule_id)
    return found[0] if found else None


async def _by_conversation(tx: Tx, /, conversation_key: str) -> list[ScheduleRow]:
    return await fetch_rows(tx, _BY_CONVERSATION, conversation_key=conversation_key)


async def _recent(tx: Tx, /, limit: int) -> list[ScheduleRow]:
    return await fetch_rows(tx, _RECENT, limit=limit)


async def _cancel(tx: Tx, /, schedule_id: str, note: str) -> bool:
    return await tx.execute(_CANCEL, id=schedule_id, note=note) == 1


async def _claim(tx: Tx, /, limit: int, lease_s: float) -> list[ScheduleRow]:
    return await fetch_rows(tx, _CLAIM, limit=limit, lease_s=lease_s)


async def _each_fenced(
    tx: Tx, /, query: Query, items: Sequence[tuple[str, int, Mapping[str, object]]]
) -> set[str]:
    """One commit for them all: a batch costs one fsync, not one a row."""
    if not items:
        return set()
    done = set()
    async with tx.transaction():
        for schedule_id, fence, values in items:
            if await tx.execute(query, values, id=schedule_id, fence=fence) == 1:
                done.add(schedule_id)
    return done


def _settle_values(settle: Settle) -> dict[str, object]:
    return {
        "next_at": settle.next_at,
        "status": settle.status,
        "occurrence": settle.occurrence,
        "failures": settle.failures,
        "note": settle.note,
        "fired_at": settle.fired_at,
    }


async def _next_due(tx: Tx, /) -> float | None:
    row = await tx.fetchone(_NEXT_DUE)
    return None if row is None or row[0] is None else float(row[0])


__all__: Sequence[str] = ("Refusal", "ScheduleRow", "ScheduleTable", "Settle")
