"""Quota counters: turns and tokens per window bucket, shared by every process on the file."""

from __future__ import annotations

import time
from collections.abc import Sequence

from bot.storage.connection import StoreConnection

_ADD = (
    "INSERT INTO quota_counters (bucket, turns, tokens, expires_at) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (bucket) DO UPDATE SET turns = turns + excluded.turns,"
    " tokens = tokens + excluded.tokens, expires_at = max(expires_at, excluded.expires_at)"
)
_PRUNE = "DELETE FROM quota_counters WHERE expires_at <= ?"
PRUNE_EVERY = 500  # additions between deletions of expired buckets


class QuotaCounters(StoreConnection):
    """`quota_add` is one upsert; `quota_counts` one indexed read of a few primary keys."""

    _adds_since_prune = 0

    async def quota_counts(self, buckets: Sequence[str]) -> dict[str, tuple[int, int]]:
        """(turns, tokens) of each unexpired bucket that has any; others are absent."""
        return await self._run(self._counts_db, tuple(buckets))

    async def quota_add(self, bucket: str, *, turns: int, tokens: int, expires_at: float) -> None:
        await self._run(self._add_db, bucket, turns, tokens, expires_at)

    def _counts_db(self, buckets: tuple[str, ...]) -> dict[str, tuple[int, int]]:
        if not buckets:
            return {}
        marks = ", ".join("?" * len(buckets))
        sql = (
            "SELECT bucket, turns, tokens FROM quota_counters"
            f" WHERE bucket IN ({marks}) AND expires_at > ?"
        )
        rows = self._conn.execute(sql, (*buckets, time.time()))
        return {row[0]: (row[1], row[2]) for row in rows}

    def _add_db(self, bucket: str, turns: int, tokens: int, expires_at: float) -> None:
        self._adds_since_prune += 1
        if self._adds_since_prune >= PRUNE_EVERY:
            self._adds_since_prune = 0
            self._conn.execute(_PRUNE, (time.time(),))
        self._conn.execute(_ADD, (bucket, turns, tokens, expires_at))
