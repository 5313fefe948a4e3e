"""Event claims: platform event ids claimed once, with an expiry, durable across restarts."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert

from bot.storage.query import Query
from bot.storage.tables import database_now
from bot.storage.tables import event_claims as C
from bot.storage.tx import StoreCalls, Tx

_NOW = database_now()  # the database's clock: the expiry means the same on every host
# Insert, or take over a claim that has expired; a live claim is left alone (no row changed).
_INSERT = insert(C).values(
    event_id=sa.bindparam("event_id"), expires_at=_NOW + sa.bindparam("ttl_s")
)
_CLAIM = Query(
    _INSERT.on_conflict_do_update(
        index_elements=[C.c.event_id],
        set_={"expires_at": _INSERT.excluded.expires_at},
        where=C.c.expires_at <= _NOW,
    )
)
_RELEASE = Query(sa.delete(C).where(C.c.event_id == sa.bindparam("event_id")))
_LIVE = Query(
    sa.select(C.c.event_id).where(C.c.event_id == sa.bindparam("event_id"), C.c.expires_at > _NOW)
)
_PRUNE = Query(sa.delete(C).where(C.c.expires_at <= _NOW))
PRUNE_EVERY = 1000  # claims between deletions of expired ones


class EventClaims(StoreCalls):
    """`claim_event` is one statement; expired rows are pruned every PRUNE_EVERY claims."""

    _claims_since_prune = 0

    async def claim_event(self, event_id: str, ttl_s: float) -> bool:
        """True the first time `event_id` is claimed within `ttl_s`, by any process sharing the
        database."""
        self._claims_since_prune += 1
        prune = self._claims_since_prune >= PRUNE_EVERY
        if prune:
            self._claims_since_prune = 0
        return await self._tx(_claim, event_id, float(ttl_s), prune)

    async def release_event(self, event_id: str) -> None:
        await self._tx(_release, event_id)

    async def event_claimed(self, event_id: str) -> bool:
        """Whether `event_id` is claimed now (one read: nothing is written)."""
        return await self._tx(_claimed, event_id)


async def _claim(tx: Tx, /, event_id: str, ttl_s: float, prune: bool) -> bool:
    if prune:
        await tx.execute(_PRUNE)
    return await tx.execute(_CLAIM, event_id=event_id, ttl_s=ttl_s) == 1


async def _claimed(tx: Tx, /, event_id: str) -> bool:
    return await tx.fetchone(_LIVE, event_id=event_id) is not None


async def _release(tx: Tx, /, event_id: str) -> None:
    await tx.execute(_RELEASE, event_id=event_id)
