"""Pairings (the `pairings` table): unknown senders' codes, and who was approved, per instance.

A request is one transaction under a lock per channel instance (PostgreSQL: an advisory lock;
SQLite: the write lock), so the cap on pending codes holds across processes: two senders cannot
both take the last slot. Times come from the caller's clock (unix seconds), so one test clock
drives expiry everywhere. Rows that stopped mattering (expired codes, ended denials) are
deleted whenever a new code is issued, so the table stays as small as the cap keeps it.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Literal

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert

from bot.storage.query import Query, params
from bot.storage.rows import PairingRow
from bot.storage.tables import pairings as P
from bot.storage.tx import RowQuery, StoreCalls, Tx, fetch_rows

Outcome = Literal["approved", "issued", "pending", "denied", "full"]
_KEY = (P.c.channel == sa.bindparam("channel"), P.c.user_id == sa.bindparam("user_id"))
_ROW = RowQuery(sa.select(P).where(*_KEY), PairingRow)
_APPROVED = Query(sa.select(P.c.status).where(*_KEY, P.c.status == "approved"))
_LIVE = (P.c.status == "pending", P.c.expires_at > sa.bindparam("now"))
_PENDING_COUNT = Query(
    sa.select(sa.func.count()).select_from(P).where(P.c.channel == sa.bindparam("channel"), *_LIVE)
)
_SEEN = Query(
    sa.update(P).values(attempts=P.c.attempts + 1, sent_at=sa.bindparam("sent_at")).where(*_KEY)
)
_PRUNE = Query(
    sa.delete(P).where(
        P.c.channel == sa.bindparam("channel"),
        P.c.status != "approved",
        P.c.expires_at <= sa.bindparam("now"),
    )
)
_COLUMNS = [c.name for c in P.columns]
_INSERT = insert(P).values(params(*_COLUMNS))
_ISSUE = Query(
    _INSERT.on_conflict_do_update(
        index_elements=[P.c.channel, P.c.user_id],
        set_={name: getattr(_INSERT.excluded, name) for name in _COLUMNS[2:]},
    )
)
_BY_CODE = RowQuery(sa.select(P).where(P.c.code == sa.bindparam("code"), *_LIVE), PairingRow)
_DECIDE = Query(
    sa.update(P)
    .values(params("status", "expires_at", "decided_at", "decided_by"))
    .where(*_KEY, *_LIVE)
)
_LISTED = RowQuery(
    sa.select(P)
    .where(
        P.c.status == sa.bindparam("status"),
        (P.c.status == "approved") | (P.c.expires_at > sa.bindparam("now")),
    )
    .order_by(P.c.created_at.desc())
    .limit(sa.bindparam("limit")),
    PairingRow,
)
_UNTOLD = RowQuery(
    sa.select(P)
    .where(P.c.status == "approved", P.c.notified_at.is_(None))
    .order_by(P.c.decided_at)
    .limit(50),
    PairingRow,
)
_REVOKE = Query(sa.delete(P).where(*_KEY, P.c.status == "approved"))
_TELL = Query(
    sa.update(P).values(notified_at=sa.bindparam("now")).where(*_KEY, P.c.notified_at.is_(None))
)


@dataclass(frozen=True, slots=True)
class PairingRequest:
    """A DM from a sender the access policy does not know, as the pairing gate asks about it."""

    channel: str
    user_id: str
    chat: str  # a chat record, JSON
    user_name: str | None
    language: str | None
    code: str  # the code to issue if a new one is due (the caller draws it)
    now: float
    ttl_s: float
    max_pending: int
    resend_s: float


@dataclass(frozen=True, slots=True)
class PairingTicket:
    """What became of a request: `send` says whether the sender is to be told (`code`) now."""

    outcome: Outcome
    code: str | None = None
    expires_at: float | None = None
    send: bool = False


class PairingTable(StoreCalls):
    """`PairingRecords` (bot/storage/roles.py)."""

    async def pairing_request(self, request: PairingRequest) -> PairingTicket:
        if await self._tx(_approved, request.channel, request.user_id):
            return PairingTicket("approved")  # the common case: one read, no lock
        return await self._tx(_request, request)

    async def pairing_decide(
        self, code: str, *, approve: bool, by: str, now: float, block_s: float
    ) -> PairingRow | None:
        return await self._tx(_decide, code, approve, by, now, block_s)

    async def pairing_rows(self, status: str, *, now: float, limit: int = 100) -> list[PairingRow]:
        return await self._tx(fetch_rows, _LISTED, status=status, now=now, limit=limit)

    async def pairing_revoke(self, channel: str, user_id: str) -> bool:
        return await self._tx(_revoke, channel, user_id)

    async def pairing_untold(self, channels: Collection[str], now: float) -> list[PairingRow]:
        return await self._tx(_untold, frozenset(channels), now)


async def _approved(tx: Tx, /, channel: str, user_id: str) -> bool:
    return await tx.fetchone(_APPROVED, channel=channel, user_id=user_id) is not None


async def _request(tx: Tx, /, r: PairingRequest) -> PairingTicket:
    key = {"channel": r.channel, "user_id": r.user_id}
    async with tx.transaction():
        await tx.lock("pairing", r.channel)
        rows = await fetch_rows(tx, _ROW, **key)
        row = rows[0] if rows else None
        if row is not None and row.status == "approved":
            return PairingTicket("approved")
        if row is not None and row.expires_at > r.now:  # a live code, or a denial
            send = row.status == "pending" and r.now - row.sent_at >= r.resend_s
            await tx.execute(_SEEN, sent_at=r.now if send else row.sent_at, **key)
            if row.status == "denied":
                return PairingTicket("denied")
            return PairingTicket("pending", row.code, row.expires_at, send)
        count = await tx.fetchone(_PENDING_COUNT, channel=r.channel, now=r.now)
        if count is not None and int(count[0]) >= r.max_pending:
            return PairingTicket("full")
        await tx.execute(_PRUNE, channel=r.channel, now=r.now)
        expires_at = r.now + r.ttl_s
        await tx.execute(
            _ISSUE,
            code=r.code,
            status="pending",
            chat=r.chat,
            user_name=r.user_name,
            language=r.language,
            created_at=r.now,
            expires_at=expires_at,
            sent_at=r.now,
            attempts=1,
            decided_at=None,
            decided_by=None,
            notified_at=None,
            **key,
        )
    return PairingTicket("issued", r.code, expires_at, True)


async def _decide(
    tx: Tx, /, code: str, approve: bool, by: str, now: float, block_s: float
) -> PairingRow | None:
    async with tx.transaction():
        rows = await fetch_rows(tx, _BY_CODE, code=code, now=now)
        if len(rows) != 1:  # none live; two is a collision of 1 in 10^12: decide neither
            return None
        row = rows[0]
        status = "approved" if approve else "denied"
        expires_at = row.expires_at if approve else now + block_s
        values = {"status": status, "expires_at": expires_at, "decided_at": now, "decided_by": by}
        await tx.execute(_DECIDE, channel=row.channel, user_id=row.user_id, now=now, **values)
    return replace(row, status=status, expires_at=expires_at, decided_at=now, decided_by=by)


async def _revoke(tx: Tx, /, channel: str, user_id: str) -> bool:
    return await tx.execute(_REVOKE, channel=channel, user_id=user_id) == 1


async def _untold(tx: Tx, /, channels: frozenset[str], now: float) -> list[PairingRow]:
    """The approvals on `channels` no process has taken to tell yet, each taken by this one
    (exactly one process takes each: the update only changes a row still untold)."""
    taken = []
    for row in await fetch_rows(tx, _UNTOLD):
        if (
            row.channel in channels
            and await tx.execute(_TELL, channel=row.channel, user_id=row.user_id, now=now) == 1
        ):
            taken.append(row)
    return taken
