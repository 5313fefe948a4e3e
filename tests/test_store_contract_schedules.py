"""The store's schedules (bot/storage/schedules.py), on SQLite and on PostgreSQL: limits, the
claim of due rows (once, across stores on one database), and the fence that keeps a process
that lost its claim from recording anything."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

from bot.storage.backends import AnyStore
from bot.storage.schedules import ScheduleRow, Settle
from tests.pg_kit import pg_database, pg_url
from tests.test_store_contract import Opener, opener, store

__all__ = ["opener", "pg_database", "pg_url", "store"]


def _row(n: int, *, user: str = "u1", key: str = "websocket:c1", due: float = -1) -> ScheduleRow:
    now = time.time()
    return ScheduleRow(
        id=f"s{n}", conversation_key=key, chat='{"channel": "websocket", "chat_id": "c1"}',
        user_id=user, kind="text", body=f"hello {n}", spec=f"at:{now + due}", timezone="UTC",
        missed="late", status="active", next_at=now + due, occurrence=0, fence=0,
        lease_until=None, sending=None, failures=0, note=None, language=None,
        created_at=now, fired_at=None,
    )  # fmt: skip


async def test_limits_per_user_and_per_conversation(store: AnyStore) -> None:
    add = store.add_schedule
    assert await add(_row(1), max_per_user=2, max_per_conversation=5) is None
    assert await add(_row(2), max_per_user=2, max_per_conversation=5) is None
    assert await add(_row(3), max_per_user=2, max_per_conversation=5) == "user"
    assert await add(_row(4, user="u2"), max_per_user=5, max_per_conversation=2) == "conversation"
    assert (
        await add(_row(5, user="u2", key="websocket:c2"), max_per_user=5, max_per_conversation=2)
        is None
    )
    assert await store.cancel_schedule("s1", "by the user")
    assert not await store.cancel_schedule("s1", "again")
    assert await add(_row(6), max_per_user=2, max_per_conversation=5) is None  # room again
    listed = await store.conversation_schedules("websocket:c1")
    assert [r.id for r in listed] == ["s2", "s6"] or [r.id for r in listed] == ["s6", "s2"]


async def test_a_due_row_is_claimed_once_across_stores(opener: Opener) -> None:
    async with opener() as one, opener() as two:
        for n in range(40):
            await one.add_schedule(
                _row(n, user=f"u{n}", key=f"k{n}"), max_per_user=9, max_per_conversation=9
            )
        await one.add_schedule(
            _row(99, user="later", key="later", due=3600), max_per_user=9, max_per_conversation=9
        )
        claims = await asyncio.gather(
            *(s.claim_due_schedules(7, 30.0) for _ in range(5) for s in (one, two))
        )
        ids = [row.id for batch in claims for row in batch]
        assert sorted(ids) == sorted(f"s{n}" for n in range(40))  # each once, the later one not
        assert all(row.fence == 1 for batch in claims for row in batch)
        assert await one.claim_due_schedules(100, 30.0) == []  # leased
        wait = await two.next_schedule_in()
        # the leased ones wait for their lease; the row's due time was written from this
        # clock, the wait read against the database's, whose 'now' SQLite keeps to the ms
        assert wait is not None and 3500 < wait <= 3600.01


async def test_the_fence_keeps_a_lost_claim_from_recording(store: AnyStore) -> None:
    s = store
    for n in (1, 2):
        await s.add_schedule(_row(n), max_per_user=9, max_per_conversation=9)
    first = {r.id: r for r in await s.claim_due_schedules(10, 0.0)}
    await asyncio.sleep(0.05)  # its lease of 0 s has run out: another process takes s1 over
    await s.extend_schedule_leases([("s2", first["s2"].fence)], 30.0)  # s2's holder lives on
    [second] = await s.claim_due_schedules(10, 30.0)
    assert second.id == "s1" and second.fence == first["s1"].fence + 1
    stale = [("s1", first["s1"].fence, "{}"), ("s2", first["s2"].fence, '{"occurrence": 0}')]
    assert await s.schedules_sending(stale) == {"s2"}
    done = Settle("s1", first["s1"].fence, None, "done", 1)
    assert await s.settle_schedules([done, replace(done, id="s2", fence=first["s2"].fence)]) == {
        "s2"
    }
    assert await s.schedules_sending([("s1", second.fence, '{"occurrence": 0}')]) == {"s1"}
    assert await s.extend_schedule_leases([("s1", second.fence), ("s2", 99)], 30.0) == {"s1"}
    assert await s.settle_schedules([replace(done, fence=second.fence, fired_at=1.0)]) == {"s1"}
    row = await s.get_schedule("s1")
    assert row is not None
    assert row == replace(
        row, status="done", occurrence=1, sending=None, lease_until=None, next_at=None
    )
    assert await s.next_schedule_in() is None
    assert await s.settle_schedules([]) == set()


async def test_a_cancelled_schedule_cannot_be_settled_into_life(store: AnyStore) -> None:
    s = store
    await s.add_schedule(_row(1), max_per_user=9, max_per_conversation=9)
    [claimed] = await s.claim_due_schedules(10, 30.0)
    assert await s.cancel_schedule("s1", "by an admin")
    back = Settle("s1", claimed.fence, time.time() + 60, "active", 1)
    assert await s.settle_schedules([back]) == set()
    row = await s.get_schedule("s1")
    assert row is not None and row.status == "cancelled" and row.next_at is None
    assert [r.id for r in await s.recent_schedules()] == ["s1"]
