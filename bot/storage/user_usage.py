"""One user's own usage (`/usage`): turns, and tokens per model, since a UTC date.

Read from the rows the turns already write (`turns`, `usage`, through `chat_sessions`, which
names the user and channel): nothing more is recorded for it. Specialists' sessions carry the
user too, so their tokens count; only the coordinator's sessions hold turns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import sqlalchemy as sa

from bot.storage.query import Query
from bot.storage.tables import chat_sessions, turns, usage
from bot.storage.tx import StoreCalls, Tx

S, U = chat_sessions, usage
_MINE = (S.c.channel == sa.bindparam("channel"), S.c.user_id == sa.bindparam("user_id"))
_TURNS = Query(
    sa.select(sa.func.count())
    .select_from(turns.join(S, S.c.id == turns.c.session_id))
    .where(*_MINE, turns.c.created_at >= sa.bindparam("since"))
)
_TOKENS = Query(
    sa.select(
        sa.func.coalesce(U.c.model, "-"),
        sa.func.coalesce(sa.func.sum(U.c.input_tokens), 0),
        sa.func.coalesce(sa.func.sum(U.c.output_tokens), 0),
    )
    .select_from(U.join(S, S.c.id == U.c.session_id))
    .where(*_MINE, U.c.created_at >= sa.bindparam("since"))
    .group_by(sa.literal_column("1"))
)


@dataclass(frozen=True, slots=True)
class UserUsage:
    turns: int
    tokens: tuple[tuple[str, int, int], ...]  # (model, input, output) per model


async def _user_usage(tx: Tx, /, **values: str) -> UserUsage:
    found = await tx.fetchone(_TURNS, **values)
    count = int(found[0]) if found is not None else 0
    rows = await tx.fetch(_TOKENS, **values)
    return UserUsage(count, tuple((str(m), int(i), int(o)) for m, i, o in rows))


class UserUsageRecords(Protocol):
    async def user_usage(self, *, channel: str, user_id: str, since: str) -> UserUsage: ...


class UserUsageViews(StoreCalls):
    async def user_usage(self, *, channel: str, user_id: str, since: str) -> UserUsage:
        """The user's turns and tokens on `channel` since `since` (an ISO date, UTC)."""
        return await self._tx(_user_usage, channel=channel, user_id=user_id, since=since)
