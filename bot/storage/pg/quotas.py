"""Quota counters on PostgreSQL: turns and tokens per window bucket, shared by every process."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bot.storage.pg.connection import PgConnection

if TYPE_CHECKING:
    from bot.storage.pg.conn import Conn

_ADD = (
    "INSERT INTO quota_counters (bucket, turns, tokens, expires_at) VALUES ($1, $2, $3, $4)"
    " ON CONFLICT (bucket) DO UPDATE SET turns = quota_counters.turns + excluded.turns,"
    " tokens = quota_counters.tokens + excluded.tokens,"
    " expires_at = greatest(quota_counters.expires_at, excluded.expires_at)"
)
_COUNTS = (
    "SELECT bucket, turns, tokens FROM quota_counters"
    " WHERE bucket = ANY($1::text[]) AND expires_at > $2"
)
_PRUNE = "DELETE FROM quota_counters WHERE expires_at <= $1"
PRUNE_EVERY = 500  # additions between deletions of expired buckets


class PgQuotaCounters(PgConnection):
    """`quota_add` is one upsert; `quota_counts` one indexed read of a few primary keys."""

    _adds_since_prune = 0

    async def quota_counts(self, buckets: Sequence[str]) -> dict[str, tuple[int, int]]:
        """(turns, tokens) of each unexpired bucket that has any; others are absent."""
        if not buckets:
            return {}
        rows = await self._select(_COUNTS, list(buckets), time.time())
        return {row["bucket"]: (row["turns"], row["tokens"]) for row in rows}

    async def quota_add(self, bucket: str, *, turns: int, tokens: int, expires_at: float) -> None:
        self._adds_since_prune += 1
        prune = self._adds_since_prune >= PRUNE_EVERY
        if prune:
            self._adds_since_prune = 0
        await self._run(_add, bucket, turns, tokens, expires_at, prune)


async def _add(
    conn: Conn, bucket: str, turns: int, tokens: int, expires_at: float, prune: bool
) -> None:
    if prune:
        await conn.execute(_PRUNE, time.time())
    await conn.execute(_ADD, bucket, turns, tokens, expires_at)
