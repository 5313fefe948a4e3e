"""The `pairings` table's contract, on SQLite and on PostgreSQL (two stores on one database are
two processes): one code per sender, resent no faster than `resend_s`, the cap on pending codes
held under a race, approval and denial by code, each approval told by exactly one process."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from bot.storage.backends import AnyStore
from bot.storage.pairings import PairingRequest
from tests.test_store_contract import Opener, opener, pg_database, pg_url, store

__all__ = ["opener", "pg_database", "pg_url", "store"]  # fixtures

ASK = PairingRequest(
    channel="telegram",
    user_id="7",
    chat='{"channel": "telegram", "chat_id": "7"}',
    user_name="Ann",
    language="de",
    code="ABCD2345",
    now=1000.0,
    ttl_s=3600,
    max_pending=3,
    resend_s=60,
)


async def test_one_code_per_sender_resent_no_faster_than_resend_s(store: AnyStore) -> None:
    first = await store.pairing_request(ASK)
    assert (first.outcome, first.code, first.expires_at, first.send) == (
        "issued",
        "ABCD2345",
        4600.0,
        True,
    )
    again = await store.pairing_request(replace(ASK, code="ZZZZ9999", now=1030))
    assert (again.outcome, again.code, again.send) == ("pending", "ABCD2345", False)
    later = await store.pairing_request(replace(ASK, code="ZZZZ9999", now=1061))
    assert (later.outcome, later.code, later.send) == ("pending", "ABCD2345", True)
    [row] = await store.pairing_rows("pending", now=1100)
    assert (row.user_id, row.attempts, row.sent_at, row.language) == ("7", 3, 1061, "de")
    # the code's time is up: a new code, the old one gone
    expired = await store.pairing_request(replace(ASK, code="NEWC0DE2", now=4601))
    assert (expired.outcome, expired.code) == ("issued", "NEWC0DE2")
    assert (
        await store.pairing_decide("ABCD2345", approve=True, by="cli", now=4602, block_s=60) is None
    )


async def test_approved_passes_and_is_told_by_one_process(opener: Opener) -> None:
    async with opener() as one, opener() as other:
        await one.pairing_request(ASK)
        assert (
            await other.pairing_decide("WRONG234", approve=True, by="x", now=1001, block_s=1)
            is None
        )
        row = await other.pairing_decide("ABCD2345", approve=True, by="admin", now=1002, block_s=1)
        assert row is not None and (row.status, row.decided_by, row.user_id) == (
            "approved",
            "admin",
            "7",
        )
        assert (await one.pairing_request(replace(ASK, now=99999))).outcome == "approved"
        assert await one.pairing_rows("pending", now=1003) == []
        assert [r.user_id for r in await one.pairing_rows("approved", now=99999)] == ["7"]
        # a decided code is decided once
        assert (
            await one.pairing_decide("ABCD2345", approve=False, by="x", now=1004, block_s=1) is None
        )
        told = await asyncio.gather(
            one.pairing_untold(["telegram"], 1005), other.pairing_untold(["telegram"], 1005)
        )
        assert sorted(len(t) for t in told) == [0, 1]
        assert await one.pairing_untold(["telegram"], 1006) == []


async def test_untold_approvals_of_other_instances_are_left(store: AnyStore) -> None:
    await store.pairing_request(ASK)
    await store.pairing_decide("ABCD2345", approve=True, by="cli", now=1001, block_s=1)
    assert await store.pairing_untold(["slack"], 1002) == []
    assert [r.user_id for r in await store.pairing_untold(["telegram"], 1003)] == ["7"]


async def test_a_denied_sender_gets_no_code_until_the_denial_ends(store: AnyStore) -> None:
    await store.pairing_request(ASK)
    denied = await store.pairing_decide("ABCD2345", approve=False, by="cli", now=1010, block_s=600)
    assert denied is not None and denied.status == "denied"
    quiet = await store.pairing_request(replace(ASK, code="OTHER234", now=1500))
    assert (quiet.outcome, quiet.send, quiet.code) == ("denied", False, None)
    anew = await store.pairing_request(replace(ASK, code="OTHER234", now=1611))
    assert (anew.outcome, anew.code) == ("issued", "OTHER234")


async def test_the_cap_on_pending_codes_holds_when_senders_race(opener: Opener) -> None:
    async with opener() as one, opener() as other:
        asks = [
            replace(ASK, user_id=f"u{i}", code=f"CODE{i:04d}", max_pending=3) for i in range(12)
        ]
        tickets = await asyncio.gather(
            *((one if i % 2 else other).pairing_request(a) for i, a in enumerate(asks))
        )
        outcomes = sorted(t.outcome for t in tickets)
        assert outcomes == ["full"] * 9 + ["issued"] * 3
        assert len(await one.pairing_rows("pending", now=1001)) == 3
        # another instance has slots of its own
        elsewhere = await one.pairing_request(replace(ASK, channel="slack", user_id="u0"))
        assert elsewhere.outcome == "issued"
        # an expired code frees its slot (and its row goes)
        late = replace(ASK, user_id="late", code="LATE2345", now=4601)
        assert (await other.pairing_request(late)).outcome == "issued"
        assert [r.user_id for r in await one.pairing_rows("pending", now=4602)] == ["late"]


async def test_a_revoked_approval_pairs_anew(store: AnyStore) -> None:
    await store.pairing_request(ASK)
    await store.pairing_decide("ABCD2345", approve=True, by="cli", now=1001, block_s=1)
    assert not await store.pairing_revoke("telegram", "8")
    assert not await store.pairing_revoke("slack", "7")
    assert await store.pairing_revoke("telegram", "7")
    assert not await store.pairing_revoke("telegram", "7")
    again = await store.pairing_request(replace(ASK, code="AGAIN234", now=1002))
    assert (again.outcome, again.code) == ("issued", "AGAIN234")
    assert not await store.pairing_revoke("telegram", "7")  # a pending code is not an approval
