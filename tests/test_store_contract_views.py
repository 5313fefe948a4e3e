"""The admin views on both backends: sessions, conversations, turns and usage, as records.

Runs on SqliteStore and PostgresStore through the fixtures of tests/test_store_contract.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.storage.backends import AnyStore
from bot.storage.rows import ConversationRow, SessionRow, TurnRow, UsageTotalRow
from bot.storage.user_usage import UserUsage
from tests.test_store_contract import SESSION, opener, pg_database, pg_url, store

__all__ = ["opener", "pg_database", "pg_url", "store"]  # fixtures

OTHER = {"channel": "slack", "conversation_key": "slack:T1/C1", "user_id": "U9"}


async def _turn(store: AnyStore, session: str, turn_id: str, status: str) -> None:
    await store.create_turn(
        turn_id=turn_id,
        session_id=session,
        channel=SESSION["channel"],
        conversation_key=SESSION["conversation_key"],
        inbound_event_ids=[f"e-{turn_id}"],
        placeholder=None,
    )
    await store.finish_turn(turn_id, status=status, error="boom" if status == "failed" else None)


async def test_sessions_read_as_records(store: AnyStore) -> None:
    root = await store.active_session(**SESSION, persona_version="v1")
    child = await store.create_session(agent_id="specialist-a", parent_session_id=root, **SESSION)
    session = await store.get_session(root)
    assert isinstance(session, SessionRow)
    assert (session.id, session.agent_id, session.parent_session_id, session.status) == (
        root,
        "default",
        None,
        "active",
    )
    assert (session.channel, session.user_id, session.persona_version) == ("telegram", "7", "v1")
    assert await store.get_session("nope") is None
    assert [(c.id, c.parent_session_id) for c in await store.child_sessions(root)] == [
        (child, root)
    ]
    assert [s.id for s in await store.recent_sessions()] == [root]  # coordinators only
    assert {s.id for s in await store.recent_sessions(root_only=False)} == {root, child}
    assert [s.id for s in await store.find_sessions(root[:6])] == [root]
    assert [s.id for s in await store.find_sessions(f"{root[:4]}%{root[4:6]}")] == [root]
    assert await store.find_sessions("zz") == []  # ids are hex


async def test_conversations_count_failed_turns_and_filter(store: AnyStore) -> None:
    root = await store.active_session(**SESSION)
    other = await store.active_session(**OTHER)
    for turn_id, status in (("t1", "completed"), ("t2", "failed"), ("t3", "failed")):
        await _turn(store, root, turn_id, status)
    rows = await store.conversations()
    assert all(isinstance(row, ConversationRow) for row in rows)
    assert {row.id: row.failed_turns for row in rows} == {root: 2, other: 0}
    assert [row.id for row in await store.conversations(channel="slack")] == [other]
    assert [row.id for row in await store.conversations(user_id="7")] == [root]
    assert await store.conversations(channel="slack", user_id="7") == []
    turns = await store.turns_for_session(root)
    assert all(isinstance(turn, TurnRow) for turn in turns)
    assert [(t.id, t.status, t.error, t.inbound_event_ids) for t in turns] == [
        ("t1", "completed", None, ("e-t1",)),
        ("t2", "failed", "boom", ("e-t2",)),
        ("t3", "failed", "boom", ("e-t3",)),
    ]


async def test_usage_totals_group_by_day_channel_user_and_model(store: AnyStore) -> None:
    session = await store.active_session(**SESSION)
    for model, tokens in (("m1", 10), ("m2", 7), ("m1", 3)):
        await store.record_usage(
            session_id=session, turn_id="t", provider="p", model=model,
            input_tokens=tokens, output_tokens=1,
        )  # fmt: skip
    await store.record_usage(
        session_id="gone", turn_id=None, provider="p", model="m0", input_tokens=1, output_tokens=0
    )  # a session no longer there: "-" for its channel and user
    today = datetime.now(UTC).date().isoformat()
    rows = sorted(await store.usage_totals(), key=lambda row: row.model)
    assert rows == [
        UsageTotalRow(today, "-", "-", "m0", 1, 1, 0),
        UsageTotalRow(today, "telegram", "7", "m1", 2, 13, 2),
        UsageTotalRow(today, "telegram", "7", "m2", 1, 7, 1),
    ]
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
    assert await store.usage_totals(tomorrow) == []
    assert [row.model for row in await store.usage_for_session(session)] == ["m1", "m2", "m1"]


async def test_user_usage_counts_one_users_turns_and_tokens_since_a_day(store: AnyStore) -> None:
    """`/usage`: the user's turns (coordinator sessions) and tokens per model, specialists'
    included, on that channel only, since a UTC date; another user's are not theirs."""
    root = await store.active_session(**SESSION, persona_version="v1")
    child = await store.create_session(agent_id="specialist-a", parent_session_id=root, **SESSION)
    other = await store.active_session(**OTHER, persona_version="v1")
    for turn_id in ("t1", "t2"):
        await _turn(store, root, turn_id, "completed")
    await _turn(store, other, "t3", "completed")
    for session, model, tokens in ((root, "big", 100), (root, "big", 5), (child, "small", 7),
                                   (other, "big", 1000)):  # fmt: skip
        await store.record_usage(
            session_id=session, turn_id="t1", provider="openai", model=model,
            input_tokens=tokens, output_tokens=1,
        )  # fmt: skip
    today = datetime.now(UTC).date().isoformat()
    mine = await store.user_usage(channel="telegram", user_id="7", since=today)
    assert mine.turns == 2
    assert sorted(mine.tokens) == [("big", 105, 2), ("small", 7, 1)]
    later = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
    assert await store.user_usage(channel="telegram", user_id="7", since=later) == UserUsage(0, ())
    elsewhere = await store.user_usage(channel="slack", user_id="7", since=today)
    assert (elsewhere.turns, elsewhere.tokens) == (0, ())
