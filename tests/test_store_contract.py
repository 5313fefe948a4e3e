"""The gateway's `Store` contract (bot/storage/base.py), for every implementation.

The agent-facing parts (messages, audit, usage, memories) are covered in test_storage.py; this
file covers what the gateway adds: event claims, active sessions across `/new`, turns and the
placeholder handle they keep for recovery.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from adapters.base import ChatRef, MessageHandle
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
