"""Event claims: platform event ids claimed once, with an expiry, durable across restarts."""

from __future__ import annotations

from collections import OrderedDict

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
_PRUNE = Query(sa.delete(C).where(C.c.expires_at <= _NOW))
PRUNE_EVERY = 1000  # claims between deletions of expired ones
# Claims made ahead for this process's gateway and not yet taken by it: it takes each within
# the same call chain, so only ones it never reached (none known) wait here, the oldest dropped.
MAX_AHEAD = 10_000


class EventClaims(StoreCalls):
    """`claim_event` is one statement (none for a claim made ahead: `claim_event_ahead`);
    expired rows are pruned every PRUNE_EVERY claims."""

    _claims_since_prune = 0
    _ahead: OrderedDict[str, None] | None = None

    async def claim_event(self, event_id: str, ttl_s: float) -> bool:
        """True the first time `event_id` is claimed within `ttl_s`, by any process sharing the
        database (or claimed ahead for this one: `claim_event_ahead`)."""
        if self._ahead is not None and event_id in self._ahead:
            del self._ahead[event_id]
            return True
        return await self._claim_in_database(event_id, ttl_s)

    async def _claim_in_database(self, event_id: str, ttl_s: float) -> bool:
        self._claims_since_prune += 1
        prune = self._claims_since_prune >= PRUNE_EVERY
        if prune:
            self._claims_since_prune = 0
        return await self._tx(_claim, event_id, float(ttl_s), prune)

    async def claim_event_ahead(self, event_id: str, ttl_s: float) -> bool:
        """`claim_event`, made by a channel for this process's gateway before it sees the event
        (the web socket's echo must know whether a resend was answered before it publishes):
        the gateway's own `claim_event` of it then returns True, once, without a statement."""
        if self._ahead is not None and event_id in self._ahead:
            return False  # claimed ahead already, and the gateway has not taken it yet
        claimed = await self._claim_in_database(event_id, ttl_s)
        if claimed:
            if self._ahead is None:
                self._ahead = OrderedDict()
            self._ahead[event_id] = None
            if len(self._ahead) > MAX_AHEAD:
                self._ahead.popitem(last=False)
        return claimed

    async def release_event(self, event_id: str) -> None:
        if self._ahead is not None:
            self._ahead.pop(event_id, None)
        await self._tx(_release, event_id)


async def _claim(tx: Tx, /, event_id: str, ttl_s: float, prune: bool) -> bool:
    if prune:
        await tx.execute(_PRUNE)
    return await tx.execute(_CLAIM, event_id=event_id, ttl_s=ttl_s) == 1


async def _release(tx: Tx, /, event_id: str) -> None:
    await tx.execute(_RELEASE, event_id=event_id)
