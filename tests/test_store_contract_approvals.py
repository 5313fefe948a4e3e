"""Approvals on both backends: asked once per call, decided once, used once; grants; expiry;
and a turn `waiting` for approval taken up again without counting as a crash's resumption.

Runs on SqliteStore and PostgresStore through the fixtures of tests/test_store_contract.py;
two stores on one database stand for two processes.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest

from bot.storage.backends import AnyStore
from bot.storage.rows import ApprovalRow
from tests.test_store_contract import (
    SESSION,
    Opener,
    opener,
    pg_database,
    pg_url,
    store,
)

__all__ = ["opener", "pg_database", "pg_url", "store"]  # fixtures


def _request(approval_id: str = "a1", call_id: str = "c1", expires_in: float = 300) -> ApprovalRow:
    now = time.time()
    return ApprovalRow(
        id=approval_id,
        turn_id="t1",
        session_id="s1",
        call_id=call_id,
        tool_name="create_payment",
        arguments='{"service": "ASSESSMENT"}',
        target="service=ASSESSMENT",
        conversation_key="telegram:42",
        channel="telegram",
        user_id="7",
        status="pending",
        decision=None,
        decided_by=None,
        created_at=now,
        expires_at=now + expires_in,
        decided_at=None,
        notice=None,
    )


async def test_one_request_per_call_the_first_kept(store: AnyStore) -> None:
    made = await store.create_approval(_request())
    again = await store.create_approval(replace(_request(), id="a2"))  # the same call, resumed
    assert made == again and again.id == "a1"
    assert await store.approval("a2") is None
    assert await store.approval_for_call("t1", "c1") == made
    assert [row.id for row in await store.pending_approvals("telegram:42")] == ["a1"]


@pytest.mark.parametrize("alone", [False, True], ids=["shared", "alone"])
async def test_the_pending_requests_follow_every_create_and_decision(
    opener: Opener, alone: bool
) -> None:
    """Written alone, the store counts each conversation's pending requests instead of asking
    the table every turn: what it answers is what the table holds."""
    async with opener() as store, opener() as before:
        await before.create_approval(_request("early", "c0"))  # pending when the store starts
        if alone:
            store.write_alone()
        assert [r.id for r in await store.pending_approvals("telegram:42")] == ["early"]
        assert await store.pending_approvals("telegram:9") == []
        await store.create_approval(_request("a1", "c1"))
        await store.create_approval(_request("a2", "c1"))  # the same call again: no new one
        await store.create_approval(replace(_request("b1", "c2"), conversation_key="telegram:9"))
        assert [r.id for r in await store.pending_approvals("telegram:42")] == ["early", "a1"]
        assert [r.id for r in await store.pending_approvals("telegram:9")] == ["b1"]
        for approval_id in ("early", "a1", "a1"):  # the second time: decided already
            await store.decide_approval(
                approval_id, status="denied", decision="deny", by="u", at=1.0
            )
        assert await store.pending_approvals("telegram:42") == []
        await store.create_approval(_request("a3", "c3"))
        assert [r.id for r in await store.pending_approvals("telegram:42")] == ["a3"]
        assert [r.id for r in await store.pending_approvals("telegram:9")] == ["b1"]


async def test_decided_once_across_processes(opener: Opener) -> None:
    async with opener() as one, opener() as two:
        await one.create_approval(_request())
        results = await asyncio.gather(
            one.decide_approval("a1", status="allowed", decision="once", by="slack:U1", at=1.0),
            two.decide_approval("a1", status="denied", decision="deny", by="slack:U2", at=1.0),
        )
        winners = [row for row in results if row is not None]
        assert len(winners) == 1
        (won,) = winners
        assert (await two.approval("a1")) == won
        assert won.decided_by in {"slack:U1", "slack:U2"} and won.decided_at == 1.0
        assert not await one.pending_approvals("telegram:42")
        # a replayed press: nothing
        again = await one.decide_approval("a1", status="allowed", decision="once", by="x", at=2.0)
        assert again is None


async def test_an_allowed_call_is_used_once(opener: Opener) -> None:
    async with opener() as one, opener() as two:
        await one.create_approval(_request())
        assert await one.use_approval("a1") is False  # pending: not allowed yet
        await one.decide_approval("a1", status="allowed", decision="once", by="u", at=1.0)
        used = await asyncio.gather(one.use_approval("a1"), two.use_approval("a1"))
        assert sorted(used) == [False, True]
        found = await one.approval("a1")
        assert found is not None and found.status == "used"


async def test_expired_requests_and_the_next_expiry(store: AnyStore) -> None:
    assert await store.next_approval_expiry() is None
    await store.create_approval(_request("old", "c1", expires_in=-1))
    await store.create_approval(_request("new", "c2", expires_in=300))
    assert [row.id for row in await store.expired_approvals(time.time())] == ["old"]
    upcoming = await store.next_approval_expiry()
    assert upcoming is not None and upcoming < time.time()
    await store.decide_approval("old", status="expired", decision="expired", by="timeout", at=0)
    assert not await store.expired_approvals(time.time())
    upcoming = await store.next_approval_expiry()
    assert upcoming is not None and upcoming > time.time() + 200


async def test_grants_are_per_conversation_tool_and_target(store: AnyStore) -> None:
    await store.grant_approval("telegram:42", "create_payment", "service=A", by="u", at=1.0)
    await store.grant_approval("telegram:42", "create_payment", "service=A", by="u", at=2.0)
    assert await store.approval_granted("telegram:42", "create_payment", "service=A")
    assert not await store.approval_granted("telegram:42", "create_payment", "service=B")
    assert not await store.approval_granted("telegram:43", "create_payment", "service=A")
    assert not await store.approval_granted("telegram:42", "delete_file", "service=A")


async def test_a_notice_is_kept(store: AnyStore) -> None:
    await store.create_approval(_request())
    await store.set_approval_notice("a1", '{"message_id": "1.2"}')
    found = await store.approval("a1")
    assert found is not None and found.notice == '{"message_id": "1.2"}'


async def test_a_waiting_turn_resumes_without_counting_an_attempt(store: AnyStore) -> None:
    session = await store.active_session(**SESSION, persona_version="v1")
    await store.create_turn(
        turn_id="t1",
        session_id=session,
        channel=SESSION["channel"],
        conversation_key=SESSION["conversation_key"],
        inbound_event_ids=["e1"],
        placeholder=None,
    )
    await store.finish_turn("t1", status="waiting")
    assert not await store.unfinished_turns()  # not a crash's to resume at start
    resumed = await store.begin_resume("t1")
    assert resumed is not None and resumed.resume_attempts == 0
    turn = await store.get_turn("t1")
    assert turn is not None and turn.status == "running"
    again = await store.begin_resume("t1")  # now a running turn: a crash's resumption counts
    assert again is not None and again.resume_attempts == 1


async def test_decided_requests_whose_turn_still_waits(store: AnyStore) -> None:
    session = await store.active_session(**SESSION, persona_version="v1")
    await store.create_turn(
        turn_id="t1",
        session_id=session,
        channel=SESSION["channel"],
        conversation_key=SESSION["conversation_key"],
        inbound_event_ids=["e1"],
        placeholder=None,
    )
    await store.finish_turn("t1", status="waiting")
    await store.create_approval(_request())
    assert not await store.unresumed_approvals(time.time())  # pending: not decided
    await store.decide_approval("a1", status="allowed", decision="once", by="u", at=100.0)
    assert not await store.unresumed_approvals(50.0)  # decided after that
    assert [row.id for row in await store.unresumed_approvals(time.time())] == ["a1"]
    await store.begin_resume("t1")  # the turn went on: nothing left to queue
    assert not await store.unresumed_approvals(time.time())
