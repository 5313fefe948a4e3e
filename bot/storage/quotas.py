"""Quota counters: turns and tokens per window bucket, shared by every process on the database."""

from __future__ import annotations

import time
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.sql.expression import BindParameter

from bot.storage.query import Query, params
from bot.storage.tables import quota_counters as Q
from bot.storage.tx import StoreCalls, Tx

_INSERT = insert(Q).values(params("bucket", "turns", "tokens", "expires_at"))
_NEW = _INSERT.excluded
_ADD = Query(
    _INSERT.on_conflict_do_update(
        index_elements=[Q.c.bucket],
        set_={
            "turns": Q.c.turns + _NEW.turns,
            "tokens": Q.c.tokens + _NEW.tokens,
            "expires_at": sa.case(
                (Q.c.expires_at > _NEW.expires_at, Q.c.expires_at), else_=_NEW.expires_at
            ),
        },
    )
)
_PRUNE = Query(sa.delete(Q).where(Q.c.expires_at <= sa.bindparam("now")))
PRUNE_EVERY = 500  # additions between deletions of expired buckets
_COUNTS: dict[int, Query] = {}  # by how many buckets are asked for (a few, always the same)


def _counts(n: int) -> Query:
    query = _COUNTS.get(n)
    if query is None:
        wanted: list[BindParameter[str]] = [sa.bindparam(f"b{i}") for i in range(n)]
        query = _COUNTS[n] = Query(
            sa.select(Q.c.bucket, Q.c.turns, Q.c.tokens).where(
                Q.c.bucket.in_(wanted), Q.c.expires_at > sa.bindparam("now")
            )
        )
    return query


class QuotaCounters(StoreCalls):
    """`quota_add` is one upsert; `quota_counts` one indexed read of a few primary keys."""

    _adds_since_prune = 0

    async def quota_counts(self, buckets: Sequence[str]) -> dict[str, tuple[int, int]]:
        """(turns, tokens) of each unexpired bucket that has any; others are absent."""
        if not buckets:
            return {}
        return await self._tx(_read_counts, tuple(buckets))

    async def quota_add(self, bucket: str, *, turns: int, tokens: int, expires_at: float) -> None:
        self._adds_since_prune += 1
        prune = self._adds_since_prune >= PRUNE_EVERY
        if prune:
            self._adds_since_prune = 0
        values: dict[str, str | int | float] = {
            "bucket": bucket,
            "turns": turns,
            "tokens": tokens,
            "expires_at": expires_at,
        }
        await self._tx(_add, values, prune)


async def _read_counts(tx: Tx, /, buckets: tuple[str, ...]) -> dict[str, tuple[int, int]]:
    named = {f"b{i}": bucket for i, bucket in enumerate(buckets)}
    rows = await tx.fetch(_counts(len(buckets)), now=time.time(), **named)
    return {bucket: (turns, tokens) for bucket, turns, tokens in rows}


async def _add(tx: Tx, /, values: dict[str, str | int | float], prune: bool) -> None:
    if prune:
        await tx.execute(_PRUNE, now=time.time())
    await tx.execute(_ADD, **values)
