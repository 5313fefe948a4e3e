"""The gateway's `Store` contract (bot/storage/base.py), for every implementation.

The agent-facing parts (messages, audit, usage, memories) are covered in test_storage.py; this
file covers what the gateway adds: event claims, active sessions across `/new`, turns and the
placeholder handle they keep for recovery, and what resuming an interrupted turn reads.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from adapters.base import ChatRef, MessageHandle
from agent.types import AuditRecord, Message, ToolCall
from bot.storage import SqliteStore
from bot.storage.base import Store
from bot.storage.turns import handle_from_record, handle_record

IMPLEMENTATIONS: dict[str, Callable[[Path], Store]] = {
    "sqlite": lambda tmp: SqliteStore(tmp / "bot.db"),
}


@pytest.fixture(params=sorted(IMPLEMENTATIONS))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened = IMPLEMENTATIONS[request.param](tmp_path)
    await opened.open()
    yield opened
    await opened.close()


SESSION = {"channel": "telegram", "conversation_key": "telegram:42", "user_id": "7"}


async def test_claims_are_once_until_released(store: Store) -> None:
    assert await store.claim_event("e1", 60)
    assert not await store.claim_event("e1", 60)
    await store.release_event("e1")
    assert await store.claim_event("e1", 60)


async def test_the_active_session_is_kept_until_new(store: Store) -> None:
    first = await store.active_session(**SESSION)
    assert await store.active_session(**SESSION) == first
    assert await store.active_session(**(SESSION | {"user_id": "8"})) != first
    assert await store.close_active_sessions(**SESSION) == 1
    second = await store.active_session(**SESSION)  # /new in any process: a fresh one for all
    assert second != first
    assert await store.close_active_sessions(**SESSION | {"user_id": "nobody"}) == 0


async def _turn(store: Store, turn_id: str, handle: MessageHandle | None) -> None:
    session_id = await store.active_session(**SESSION)
    await store.create_turn(
        turn_id=turn_id,
        session_id=session_id,
        channel="telegram",
        conversation_key="telegram:42",
        inbound_event_ids=[f"in:{turn_id}"],
        placeholder=handle_record(handle) if handle else None,
    )


async def test_unfinished_turns_keep_the_placeholder_handle(store: Store) -> None:
    chat = ChatRef("telegram", "42", "9", team_id="T1")
    handle = MessageHandle(chat, "1001", {"parse_mode": "HTML"})
    await _turn(store, "t1", handle)
    await _turn(store, "t2", None)
    await _turn(store, "t3", handle)
    await store.finish_turn("t3", status="completed", final_text="done")
    unfinished = await store.unfinished_turns()
    assert [t["id"] for t in unfinished] == ["t1", "t2"]
    restored = handle_from_record(unfinished[0]["placeholder"])
    assert restored == handle and restored.data == {"parse_mode": "HTML"}
    assert restored.chat.team_id == "T1"
    assert unfinished[1]["placeholder"] is None


async def test_the_conversation_chat_is_where_its_last_turn_was(store: Store) -> None:
    assert await store.conversation_chat("telegram:42") is None
    await _turn(store, "t1", MessageHandle(ChatRef("telegram", "42"), "5"))
    await _turn(store, "t2", MessageHandle(ChatRef("telegram", "42", "topic-3"), "6"))
    assert await store.conversation_chat("telegram:42") == ChatRef("telegram", "42", "topic-3")


async def test_begin_resume_counts_attempts_of_running_turns_only(store: Store) -> None:
    handle = MessageHandle(ChatRef("telegram", "42"), "5")
    await _turn(store, "t1", handle)
    first = await store.begin_resume("t1")
    assert first is not None
    assert first["resume_attempts"] == 1 and first["user_id"] == "7"
    assert first["agent_id"] == "default" and first["conversation_key"] == "telegram:42"
    assert handle_from_record(first["placeholder"]) == handle
    second = await store.begin_resume("t1")
    assert second is not None and second["resume_attempts"] == 2
    await store.finish_turn("t1", status="failed", error="not resumed")
    assert await store.begin_resume("t1") is None  # finished: nobody takes it up again
    assert await store.begin_resume("no-such-turn") is None


async def test_a_turns_tool_calls_come_back_in_order_with_their_extra(store: Store) -> None:
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
    assert [(r["call_id"], r["result"], bool(r["ok"]), r["extra"]) for r in rows] == [
        ("c1", "r-c1", True, card),
        ("c2", "r-c2", True, {}),
    ]


async def test_running_worker_sessions_are_the_specialists_left_running(store: Store) -> None:
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
    assert [(r["id"], r["agent_id"], r["user_id"]) for r in rows] == [
        (worker, "specialist-research", "7")
    ]
    assert rows[0]["conversation_key"] == "telegram:42" and rows[0]["channel"] == "telegram"


async def test_a_turns_messages_are_kept_with_its_id(store: Store) -> None:
    """Resuming reads a turn's own steps back from the session's history."""
    session = await store.active_session(**SESSION)
    call = ToolCall("c1", "pay", "{}")
    await store.append_messages(session, "t0", [Message("user", "earlier")])
    await store.append_messages(session, "t1", [Message("user", "pay")])
    await store.append_messages(session, "t1", [Message("assistant", "", tool_calls=(call,))])
    history = await store.load_history(session)
    own = [m for turn_id, m in history if turn_id == "t1"]
    assert [(m.role, m.tool_calls) for m in own] == [("user", ()), ("assistant", (call,))]


async def recent(store: Store, **key: Any) -> list[dict[str, Any]]:
    """`recent_turns` of SESSION's conversation, with other keys or a limit where given."""
    return await store.recent_turns(**{**SESSION, **key})


async def test_recent_turns_read_the_active_session_back_without_creating_one(
    store: Store,
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
    assert [(t["id"], t["status"], t["final_text"]) for t in turns] == [
        ("t1", "completed", "answer 1"),
        ("t2", "stopped", None),
        ("t3", "running", None),
    ]
    assert turns[0]["inbound_messages"] == [{"message_id": "c1", "text": "question 1"}]
    assert turns[0]["placeholder"] == handle_record(handle) and turns[1]["placeholder"] is None
    assert [t["id"] for t in await recent(store, limit=2)] == ["t2", "t3"]
    assert await recent(store, user_id="8") == []
    assert await recent(store, agent_id="other") == []

    await store.close_active_sessions(**SESSION)  # /new: nothing from before comes back
    assert await recent(store) == []


async def test_a_turn_without_inbound_messages_reads_back_an_empty_list(store: Store) -> None:
    await _turn(store, "t1", None)
    [turn] = await recent(store)
    assert turn["inbound_messages"] == []
