"""Event claims on PostgreSQL: event ids claimed once, expiring on the server's clock."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.storage.pg.connection import PgConnection, rowcount

if TYPE_CHECKING:
    from bot.storage.pg.conn import Conn

_NOW = "extract(epoch FROM clock_timestamp())"  # one clock for every host sharing the database
# Insert, or take over a claim that has expired; a live claim is left alone (no row).
_CLAIM = (
    f"INSERT INTO event_claims (event_id, expires_at) VALUES ($1, {_NOW} + $2)"
    " ON CONFLICT (event_id) DO UPDATE SET expires_at = excluded.expires_at"
    f" WHERE event_claims.expires_at <= {_NOW}"
)
_RELEASE = "DELETE FROM event_claims WHERE event_id = $1"
_PRUNE = f"DELETE FROM event_claims WHERE expires_at <= {_NOW}"
PRUNE_EVERY = 1000  # claims between deletions of expired ones


class PgEventClaims(PgConnection):
    """`claim_event` is one statement; expired rows are pruned every PRUNE_EVERY claims."""

    _claims_since_prune = 0

    async def claim_event(self, event_id: str, ttl_s: float) -> bool:
        """True the first time `event_id` is claimed within `ttl_s`, by any process on this
        database."""
        self._claims_since_prune += 1
        prune = self._claims_since_prune >= PRUNE_EVERY
        if prune:
            self._claims_since_prune = 0
        return await self._run(_claim, event_id, float(ttl_s), prune)

    async def release_event(self, event_id: str) -> None:
        await self._run(_release, event_id)


async def _claim(conn: Conn, event_id: str, ttl_s: float, prune: bool) -> bool:
    if prune:
        await conn.execute(_PRUNE)
    return rowcount(await conn.execute(_CLAIM, event_id, ttl_s)) == 1


async def _release(conn: Conn, event_id: str) -> None:
    await conn.execute(_RELEASE, event_id)
