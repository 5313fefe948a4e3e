"""The gateway's `Store` contract (bot/storage/base.py), for every implementation.

Every test runs on SqliteStore (a file) and on PostgresStore (a database of the test session's
own on the local server; those skip, saying why, when no server answers). SQLite-only matters
(WAL, checkpoints, lock waits) are in test_storage.py, PostgreSQL-only ones in test_store_pg.py.
Besides claims, sessions, history and turns it covers what resuming an interrupted turn reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from adapters.base import ChatRef, MessageHandle
from agent.store import UsageRow
from agent.types import AuditRecord, Message, ToolCall
from bot.storage import AUDIT_RESULT_LIMIT
from bot.storage.backends import AnyStore, build_store
from bot.storage.rows import TurnRow, TurnUsage
from bot.storage.turns import chat_from_record, chat_record, handle_from_record, handle_record
from tests.pg_kit import pg_database, pg_url

__all__ = ["pg_database", "pg_url"]  # fixtures the contract uses

# a new store on the same database, like another process (keywords: its history cache's bounds)
Opener = Callable[..., AnyStore]


@pytest.fixture(params=["sqlite", "postgresql"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    if request.param == "sqlite":
        return lambda **cache: build_store(tmp_path / "bot.db", None, **cache)
    url: str = request.getfixturevalue("pg_url")
    return lambda **cache: build_store("unused", url, **cache)


@pytest.fixture
async def store(opener: Opener) -> AsyncIterator[AnyStore]:
    async with opener() as opened:
        yield opened


SESSION = {"channel": "telegram", "conversation_key": "telegram:42", "user_id": "7"}
CONVERSATION = [
    ("t1", Message("user", "What's the weather in Zürich? 🌦")),
    ("t1", Message("assistant", "", (ToolCall("c1", "web_search", '{"q":  "Zürich"}'),))),
    ("t1", Message("tool", "12°C", tool_call_id="c1", name="web_search", is_error=True)),
    ("t2", Message("assistant", "It is 12°C and raining.")),
]


async def test_claims_are_once_until_released(store: AnyStore) -> None:
    assert await store.claim_event("e1", 60)
    assert not await store.claim_event("e1", 60)
    await store.release_event("e1")
    assert await store.claim_event("e1", 60)
    assert await store.claim_event("short", 0)  # expired as soon as it is made
    assert await store.claim_event("short", 60)  # an expired claim is taken over
    assert not await store.claim_event("short", 60)


async def test_a_claim_made_ahead_for_the_gateway_is_its_claim_once_and_everyone_elses(
    store: AnyStore, opener: Opener
) -> None:
    """The web socket's echo claims for the gateway (bot/pipeline/dedup.py `ClaimsAhead`)."""
    assert await store.claim_event_ahead("e1", 60)
    assert not await store.claim_event_ahead("e1", 60)  # a resend: not a first
    async with opener() as other:  # another process: the claim is in the database
        assert not await other.claim_event("e1", 60)
    assert await store.claim_event("e1", 60)  # the gateway's claim: the one made ahead
    assert not await store.claim_event("e1", 60)  # once
    assert await store.claim_event_ahead("e2", 60)
    await store.release_event("e2")  # the message never reached the gateway
    async with opener() as other:
        assert await other.claim_event("e2", 60)  # released in the database
    assert not await store.claim_event("e2", 60)  # and forgotten here


async def test_the_active_session_is_kept_until_new(store: AnyStore) -> None:
    first = await store.active_session(**SESSION)
    assert await store.active_session(**SESSION) == first
    assert await store.active_session(**(SESSION | {"user_id": "8"})) != first
    assert await store.close_active_sessions(**SESSION) == 1
    second = await store.active_session(**SESSION)  # /new in any process: a fresh one for all
    assert second != first
    assert await store.close_active_sessions(**SESSION | {"user_id": "nobody"}) == 0


async def test_many_processes_asking_at_once_share_one_active_session(opener: Opener) -> None:
    async with opener() as one, opener() as two:
        found = await asyncio.gather(
            *(s.active_session(**SESSION) for _ in range(5) for s in (one, two))
        )
    assert len(set(found)) == 1


async def _turn(store: AnyStore, turn_id: str, handle: MessageHandle | None) -> None:
    session_id = await store.active_session(**SESSION)
    await store.create_turn(
        turn_id=turn_id,
        session_id=session_id,
        channel="telegram",
        conversation_key="telegram:42",
        inbound_event_ids=[f"in:{turn_id}"],
        placeholder=handle_record(handle) if handle else None,
    )


async def test_unfinished_turns_keep_the_placeholder_handle(store: AnyStore) -> None:
    chat = ChatRef("telegram", "42", "9", team_id="T1")
    handle = MessageHandle(chat, "1001", {"parse_mode": "HTML"})
    await _turn(store, "t1", handle)
    await _turn(store, "t2", None)
    await _turn(store, "t3", handle)
    await store.finish_turn("t3", status="completed", final_text="done")
    unfinished = await store.unfinished_turns()
    assert [t.id for t in unfinished] == ["t1", "t2"]
    restored = handle_from_record(unfinished[0].placeholder or {})
    assert restored == handle and restored.data == {"parse_mode": "HTML"}
    assert restored.chat.team_id == "T1"
    assert unfinished[1].placeholder is None
    finished = await store.get_turn("t3")
    assert finished is not None
    assert (finished.status, finished.final_text, finished.inbound_event_ids) == (
        "completed",
        "done",
        ("in:t3",),
    )
    with pytest.raises(LookupError, match="'t9'"):
        await store.finish_turn("t9", status="failed")
    with pytest.raises(ValueError, match="'done'"):
        await store.finish_turn("t1", status="done")


async def test_the_conversation_chat_is_where_its_last_turn_was(store: AnyStore) -> None:
    assert await store.conversation_chat("telegram:42") is None
    await _turn(store, "t1", MessageHandle(ChatRef("telegram", "42"), "5"))
    await _turn(store, "t2", MessageHandle(ChatRef("telegram", "42", "topic-3"), "6"))
    assert await store.conversation_chat("telegram:42") == ChatRef("telegram", "42", "topic-3")


async def test_the_latest_conversation_is_the_users_newest_turn_under_a_prefix(
    store: AnyStore,
) -> None:
    async def turn(turn_id: str, key: str, user: str, channel: str = "slack") -> None:
        where = {"channel": channel, "conversation_key": key, "user_id": user}
        session_id = await store.active_session(**where)
        await store.create_turn(
            turn_id=turn_id,
            session_id=session_id,
            channel=channel,
            conversation_key=key,
            inbound_event_ids=[f"in:{turn_id}"],
            placeholder=None,
        )

    latest = store.latest_conversation
    assert await latest(channel="slack", key_prefix="slack:C1:", user_id="U1") is None
    await turn("t1", "slack:C1:1.1", "U1")
    await turn("t2", "slack:C1:2.2", "U1")
    await turn("t3", "slack:C1:3.3", "U2")  # another user's thread
    await turn("t4", "slack:C10:4.4", "U1")  # another channel whose id starts the same
    await turn("t5", "slack:C1", "U1")  # the channel itself, not a thread
    await turn("t6", "slack:C1:9.9", "U1", channel="other")  # another platform's turn
    assert await latest(channel="slack", key_prefix="slack:C1:", user_id="U1") == "slack:C1:2.2"
    assert await latest(channel="slack", key_prefix="slack:C1:", user_id="U2") == "slack:C1:3.3"
    await turn("t7", "slack:C1:1.1", "U1")  # back in the first thread
    assert await latest(channel="slack", key_prefix="slack:C1:", user_id="U1") == "slack:C1:1.1"
    assert await latest(channel="slack", key_prefix="slack:C_%:", user_id="U1") is None


async def test_a_turn_is_found_by_its_inbound_events_finished_or_not(store: AnyStore) -> None:
    """What a process taking over a dead one's batch asks: did a turn take these events?"""
    chat = ChatRef("telegram", "42")
    assert await store.turn_for_events("telegram:42", ["in:t1"]) is None
    await _turn(store, "t1", None)
    await store.update_turn_placeholder("t1", chat_record(chat))  # posting it
    await _turn(store, "t2", None)
    await store.finish_turn("t1", status="completed", final_text="done")
    found = await store.turn_for_events("telegram:42", ["other", "in:t1"])
    assert found is not None
    assert (found.id, found.status, found.final_text) == ("t1", "completed", "done")
    assert handle_from_record(found.placeholder or {}) is None  # its id was never learned
    assert chat_from_record(found.placeholder or {}) == chat  # but where it went is known
    running = await store.turn_for_events("telegram:42", ["in:t2"])
    assert running is not None and running.status == "running"
    assert await store.turn_for_events("telegram:7", ["in:t1"]) is None  # another conversation
    handle = MessageHandle(chat, "77")
    await store.update_turn_placeholder("t2", handle_record(handle))  # posted
    assert await store.conversation_chat("telegram:42") == chat
    found = await store.turn_for_events("telegram:42", ["in:t2"])
    assert found is not None and found.placeholder is not None
    assert handle_from_record(found.placeholder) == handle


async def test_begin_resume_counts_attempts_of_running_turns_only(store: AnyStore) -> None:
    handle = MessageHandle(ChatRef("telegram", "42"), "5")
    await _turn(store, "t1", handle)
    first = await store.begin_resume("t1")
    assert first is not None
    assert first.resume_attempts == 1 and first.user_id == "7"
    assert first.agent_id == "default" and first.conversation_key == "telegram:42"
    assert handle_from_record(first.placeholder or {}) == handle
    second = await store.begin_resume("t1")
    assert second is not None and second.resume_attempts == 2
    await store.finish_turn("t1", status="failed", error="not resumed")
    assert await store.begin_resume("t1") is None  # finished: nobody takes it up again
    assert await store.begin_resume("no-such-turn") is None


async def test_a_turns_tool_calls_come_back_in_order_with_their_extra(store: AnyStore) -> None:
    session = await store.active_session(**SESSION)
    other = await store.active_session(**SESSION | {"user_id": "8"})
    card = {"display": [{"type": "card", "title": "Order 7"}]}
    for call_id, where, turn_id, extra in (
        ("c1", session, "t1", card),
        ("c2", session, "t1", {}),
        ("c3", other, "t1", {}),  # a specialist's session: not the coordinator's calls
        ("c4", session, "t2", {}),
    ):
        record = AuditRecord(where, turn_id, call_id, "pay", "{}", f"r-{call_id}", True, 1.0)
        await store.record_tool_call(replace(record, extra=extra))
    rows = await store.turn_tool_calls("t1", session)
    assert [(r.call_id, r.result, r.ok, r.extra) for r in rows] == [
        ("c1", "r-c1", True, card),
        ("c2", "r-c2", True, {}),
    ]


async def test_running_worker_sessions_are_the_specialists_left_running(store: AnyStore) -> None:
    parent = await store.active_session(**SESSION)
    worker = await store.create_session(
        agent_id="specialist-research", parent_session_id=parent, **SESSION
    )
    done = await store.create_session(
        agent_id="specialist-research", parent_session_id=parent, **SESSION
    )
    await store.set_session_status(worker, "running")
    await store.set_session_status(done, "completed")
    rows = await store.running_worker_sessions()
    assert [(r.id, r.agent_id, r.user_id) for r in rows] == [(worker, "specialist-research", "7")]
    assert rows[0].conversation_key == "telegram:42" and rows[0].channel == "telegram"


async def test_a_turns_messages_are_kept_with_its_id(store: AnyStore) -> None:
    """Resuming reads a turn's own steps back from the session's history."""
    session = await store.active_session(**SESSION)
    call = ToolCall("c1", "pay", "{}")
    await store.append_messages(session, "t0", [Message("user", "earlier")])
    await store.append_messages(session, "t1", [Message("user", "pay")])
    await store.append_messages(session, "t1", [Message("assistant", "", tool_calls=(call,))])
    history = await store.load_history(session)
    own = [m for turn_id, m in history if turn_id == "t1"]
    assert [(m.role, m.tool_calls) for m in own] == [("user", ()), ("assistant", (call,))]


async def test_a_turn_is_written_with_its_first_message(opener: Opener) -> None:
    """The gateway records a turn and its user's message as one write (one transaction)."""
    async with opener() as store, opener() as other:
        session_id = await store.active_session(**SESSION)
        await store.load_history(session_id)  # cached: the new message must join the cache
        turn: dict[str, Any] = {
            "session_id": session_id,
            "channel": "telegram",
            "conversation_key": "telegram:42",
            "inbound_event_ids": ["in:t1"],
            "placeholder": None,
        }
        question = Message("user", "What's the weather in Zürich? 🌦")
        await store.create_turn(turn_id="t1", **turn, messages=[question])
        assert (await store.get_turn("t1")) is not None
        assert await store.load_history(session_id) == [("t1", question)]
        assert await other.load_history(session_id) == [("t1", question)]
        # the same turn id again: the turn's INSERT fails, and its message is not written
        with pytest.raises(Exception):  # noqa: B017,PT011 - each backend's integrity error
            await store.create_turn(turn_id="t1", **turn, messages=[Message("user", "again")])
        assert await other.load_history(session_id) == [("t1", question)]
        assert await store.load_history(session_id) == [("t1", question)]


async def test_history_round_trips_and_sees_other_processes(opener: Opener) -> None:
    async with opener() as store, opener() as other:
        session_id = await store.active_session(**SESSION)
        for turn_id in ("t1", "t2"):
            messages = [m for t, m in CONVERSATION if t == turn_id]
            await store.append_messages(session_id, turn_id, messages)
        assert await store.load_history(session_id) == CONVERSATION
        # `other` is another gateway process: each cache must see the other's rows
        assert await other.load_history(session_id) == CONVERSATION
        await other.append_messages(session_id, "t3", [Message("user", "from elsewhere")])
        await store.append_messages(session_id, "t4", [Message("user", "back here")])
        expected = [*CONVERSATION, ("t3", Message("user", "from elsewhere"))]
        expected.append(("t4", Message("user", "back here")))
        assert await store.load_history(session_id) == expected
        assert await other.load_history(session_id) == expected
        rows = await other.messages_for_session(session_id)
        assert [row.is_error for row in rows] == [0, 0, 1, 0, 0, 0]


async def _a_turn_each(
    store: AnyStore, sessions: list[str], n: int, expected: list[list[tuple[str, Message]]]
) -> None:
    """Turn `n` of the conversation in each session, each history read back as it grows."""
    for i, session_id in enumerate(sessions):
        turn = [(f"t{n}", m) for _, m in CONVERSATION]
        await store.append_messages(session_id, f"t{n}", [m for _, m in turn])
        expected[i] += turn
        assert await store.load_history(session_id) == expected[i]


async def test_a_store_written_alone_keeps_its_histories_without_reading_them_back(
    opener: Opener,
) -> None:
    """One process, no Redis: the store is the database's only writer (`write_alone`), so a
    cached history is all of it. What it writes, bounded cache or not, reads back the same, and
    from its cache: a row written behind its back (which one process never meets) is not looked
    for, as the store that is not alone does."""
    async with opener(history_cache_bytes=2000, history_hot_messages=4) as store, opener() as other:
        store.write_alone()
        sessions = [await store.active_session(**SESSION | {"user_id": f"u{i}"}) for i in range(4)]
        expected: list[list[tuple[str, Message]]] = [[] for _ in sessions]
        for n in range(3):
            await _a_turn_each(store, sessions, n, expected)
        for i, session_id in enumerate(sessions):
            assert await other.load_history(session_id) == expected[i]  # all of it was written
        cached = sessions[-1]
        await other.append_messages(cached, "x", [Message("user", "behind its back")])
        assert await store.load_history(cached) == expected[-1]
        await store.append_messages(cached, "t9", [Message("user", "last")])
        assert await store.load_history(cached) == [*expected[-1], ("t9", Message("user", "last"))]


@pytest.mark.parametrize("alone", [False, True], ids=["shared", "alone"])
async def test_the_active_session_follows_every_change(opener: Opener, alone: bool) -> None:
    """Written alone, the store keeps each key's active session: every change of a session
    (/new, a status set, a session created) is seen as without it."""
    async with opener() as store:
        if alone:
            store.write_alone()
        first = await store.active_session(**SESSION)
        assert await store.active_session(**SESSION) == first
        assert await store.close_active_sessions(**SESSION) == 1
        second = await store.active_session(**SESSION)
        assert second != first
        await store.set_session_status(second, "closed")
        third = await store.active_session(**SESSION)
        assert third not in (first, second)
        other = await store.active_session(**SESSION | {"user_id": "8"})
        await store.set_session_status(other, "failed")  # another key's: this one's is kept
        assert await store.active_session(**SESSION) == third
        created = await store.create_session(agent_id="default", **SESSION)
        assert await store.active_session(**SESSION) == created  # the newest active one
        await store.set_session_status(first, "active")  # an older one active again
        assert await store.active_session(**SESSION) == created


async def test_a_small_history_cache_gives_the_same_histories(opener: Opener) -> None:
    """A cache bound to 2,000 bytes (two of these sessions), 4 messages of it as objects:
    sessions go cold (kept as bytes), are let go of, come back; each history stays what the
    database holds."""
    async with opener(history_cache_bytes=2000, history_hot_messages=4) as store, opener() as other:
        sessions = [await store.active_session(**SESSION | {"user_id": f"u{i}"}) for i in range(4)]
        expected: list[list[tuple[str, Message]]] = [[] for _ in sessions]
        for n in range(3):
            await _a_turn_each(store, sessions, n, expected)
            # another process writes to one of them, cached or not
            extra = Message("user", f"from elsewhere {n}")
            await other.append_messages(sessions[n], f"x{n}", [extra])
            expected[n].append((f"x{n}", extra))
        for i, session_id in reversed(list(enumerate(sessions))):
            assert await store.load_history(session_id) == expected[i]
            assert await other.load_history(session_id) == expected[i]


async def test_concurrent_appends_land_once_and_in_order(opener: Opener) -> None:
    async with opener() as store:
        sessions = [await store.active_session(**SESSION | {"user_id": f"u{i}"}) for i in range(3)]
        await store.load_history(sessions[0])  # one cached, two not
        await asyncio.gather(
            *(
                store.append_messages(sessions[n % 3], f"t{n}", [Message("user", str(n))])
                for n in range(60)
            )
        )
        expected = [[(f"t{n}", Message("user", str(n))) for n in range(i, 60, 3)] for i in range(3)]
        assert [await store.load_history(s) for s in sessions] == expected
    async with opener() as reopened:
        assert [await reopened.load_history(s) for s in sessions] == expected


async def test_loads_and_appends_at_once_leave_each_message_once(opener: Opener) -> None:
    async with opener() as writer:
        session_id = await writer.active_session(**SESSION)
        await writer.append_messages(session_id, "t1", [Message("user", "one")])
    async with opener() as store:  # nothing cached yet: every load reads from the start
        loads = [store.load_history(session_id) for _ in range(3)]
        append = store.append_messages(session_id, "t2", [Message("user", "two")])
        await asyncio.gather(*loads, append, store.load_history(session_id))
        assert [m.content for _, m in await store.load_history(session_id)] == ["one", "two"]


async def test_audit_and_usage_rows(store: AnyStore) -> None:
    args = '{"query":  "spaces kept"}'
    record = AuditRecord("s", "t", "c1", "web_search", args, "x" * 10_000, False, 12.5)
    await store.record_tool_call(record)
    await store.record_tool_call(AuditRecord("s", None, "c2", "clock", "{}", "short", True, 0.1))
    long, short = await store.audit_for_session("s")
    assert long.arguments == args and long.ok == 0 and long.duration_ms == 12.5
    assert long.result is not None and len(long.result) == AUDIT_RESULT_LIMIT
    assert long.result.endswith("[truncated: 10000 chars in all]")
    assert (short.result, short.ok, short.turn_id, short.extra) == (
        "short",
        1,
        None,
        None,
    )
    for tokens in (12, 30):
        await store.record_usage(
            session_id="s", turn_id="t", provider="offline", model="echo",
            input_tokens=tokens, output_tokens=3,
        )  # fmt: skip
    assert await store.turn_usage("t") == TurnUsage(2, 42, 6)
    assert [row.input_tokens for row in await store.usage_for_session("s")] == [12, 30]


async def test_a_message_and_its_model_calls_usage_are_written_together(store: AnyStore) -> None:
    usage = [UsageRow("offline", "echo", 12, 3), UsageRow("backup", "echo-2", 30, 4)]
    await store.append_messages("s", "t", [Message("assistant", "hi")], usage)
    assert await store.turn_usage("t") == TurnUsage(2, 42, 7)
    rows = await store.usage_for_session("s")
    assert [(row.provider, row.model) for row in rows] == [
        ("offline", "echo"),
        ("backup", "echo-2"),
    ]
    await store.append_messages("s", "t", [], [UsageRow("offline", "echo", 1, 1)])  # no message
    assert (await store.turn_usage("t")).model_calls == 3
    assert [m.content for _, m in await store.load_history("s")] == ["hi"]


async def test_memories_replace_by_key_and_orders_round_trip(store: AnyStore) -> None:
    user: dict[str, Any] = {"tenant": "acme", "user_id": "u1"}

    async def save(memory_type: str, content: str, key: str | None = None) -> int:
        return await store.save_memory(
            **user, memory_type=memory_type, content=content, category=None, importance=3, key=key
        )

    first = await save("fact", "Age 40", key="age")
    assert await save("fact", "Age 41", key="age") == first  # a newer value replaces it
    same = await save("pref", "likes TEA")
    assert await save("pref", "Likes tea") == same  # the same words, whatever their case
    rows = await store.list_memories(**user)
    assert sorted((r.content, r.key) for r in rows) == [
        ("Age 41", "age"),
        ("Likes tea", None),
    ]
    assert await store.list_memories(tenant="other", user_id="u1") == []
    order = {**user, "id": "o1", "service": "consult", "amount": 9.5, "currency": "EUR"}
    await store.create_order(order | {"status": "pending"})
    stored = await store.get_order("o1")
    assert stored is not None and stored.amount == 9.5
    assert await store.get_order("o2") is None
    with pytest.raises(ValueError, match="'colour'"):
        await store.create_order(order | {"id": "o3", "status": "new", "colour": "red"})


async def recent(store: AnyStore, **key: Any) -> list[TurnRow]:
    """`recent_turns` of SESSION's conversation, with other keys or a limit where given."""
    return await store.recent_turns(**{**SESSION, **key})


async def test_recent_turns_read_the_active_session_back_without_creating_one(
    store: AnyStore,
) -> None:
    assert await recent(store) == []
    assert await store.close_active_sessions(**SESSION) == 0  # reading created no session
    session_id = await store.active_session(**SESSION)
    handle = MessageHandle(ChatRef("telegram", "42"), "m1")
    for n in range(1, 4):
        await store.create_turn(
            turn_id=f"t{n}",
            session_id=session_id,
            channel="telegram",
            conversation_key="telegram:42",
            inbound_event_ids=[f"in:{n}"],
            placeholder=handle_record(handle) if n != 2 else None,
            inbound_messages=[{"message_id": f"c{n}", "text": f"question {n}"}],
        )
    await store.finish_turn("t1", status="completed", final_text="answer 1")
    await store.finish_turn("t2", status="stopped")
    turns = await recent(store)
    assert [(t.id, t.status, t.final_text) for t in turns] == [
        ("t1", "completed", "answer 1"),
        ("t2", "stopped", None),
        ("t3", "running", None),
    ]
    assert turns[0].inbound_messages == ({"message_id": "c1", "text": "question 1"},)
    assert turns[0].placeholder == handle_record(handle) and turns[1].placeholder is None
    assert [t.id for t in await recent(store, limit=2)] == ["t2", "t3"]
    assert await recent(store, user_id="8") == []
    assert await recent(store, agent_id="other") == []

    await store.close_active_sessions(**SESSION)  # /new: nothing from before comes back
    assert await recent(store) == []


async def test_a_turn_without_inbound_messages_reads_back_an_empty_list(store: AnyStore) -> None:
    await _turn(store, "t1", None)
    [turn] = await recent(store)
    assert turn.inbound_messages == ()
