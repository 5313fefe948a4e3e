"""Event claims: platform event ids claimed once, with an expiry, durable across restarts."""

from __future__ import annotations

import time

from bot.storage.connection import StoreConnection

# Insert, or take over a claim that has expired; a live claim is left alone (rowcount 0).
_CLAIM = (
    "INSERT INTO event_claims (event_id, expires_at) VALUES (?, ?)"
    " ON CONFLICT (event_id) DO UPDATE SET expires_at = excluded.expires_at"
    " WHERE event_claims.expires_at <= ?"
)
_RELEASE = "DELETE FROM event_claims WHERE event_id = ?"
_PRUNE = "DELETE FROM event_claims WHERE expires_at <= ?"
PRUNE_EVERY = 1000  # claims between deletions of expired ones


class EventClaims(StoreConnection):
    """`claim_event` is one statement; expired rows are pruned every PRUNE_EVERY claims."""

    _claims_since_prune = 0

    async def claim_event(self, event_id: str, ttl_s: float) -> bool:
        """True the first time `event_id` is claimed within `ttl_s`, in any process on this file."""
        return await self._run(self._claim_db, event_id, ttl_s)

    async def release_event(self, event_id: str) -> None:
        await self._run(self._conn.execute, _RELEASE, (event_id,))

    def _claim_db(self, event_id: str, ttl_s: float) -> bool:
        now = time.time()  # wall clock: the expiry must mean the same after a restart
        self._claims_since_prune += 1
        if self._claims_since_prune >= PRUNE_EVERY:
            self._claims_since_prune = 0
            self._conn.execute(_PRUNE, (now,))
        return self._conn.execute(_CLAIM, (event_id, now + ttl_s, now)).rowcount == 1
