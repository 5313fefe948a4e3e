"""The store's part of issue 21, on both backends: messages keep their content parts, blobs,
conversation states.

Runs on SqliteStore and PostgresStore through the fixtures of tests/test_store_contract.py.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

import pytest

from agent.types import Message
from bot.storage.backends import AnyStore
from bot.storage.rows import ConversationStateRow
from content.blobs import blob_id_of
from content.parts import AudioPart, BlobRef, FilePart, ImagePart, TextPart
from tests.test_store_contract import SESSION, Opener, opener, pg_database, pg_url, store

__all__ = ["opener", "pg_database", "pg_url", "store"]  # fixtures

PHOTO = BlobRef("a" * 64, "image/jpeg", 1234, "cat.jpg", "telegram")
MEMO = AudioPart(BlobRef("b" * 64, "audio/ogg", 99), transcript="hello")
WITH_PARTS = [
    ("t1", Message("user", "what is on it?", parts=(ImagePart(PHOTO), TextPart("what is on it?")))),
    ("t1", Message("assistant", "A cat.")),
    ("t2", Message("user", "", parts=(MEMO, FilePart(BlobRef("c" * 64, "application/pdf", 7))))),
]


async def test_history_keeps_each_messages_parts(opener: Opener) -> None:
    async with opener() as store, opener() as other:
        session = await store.active_session(**SESSION)
        await store.append_messages(session, "t1", [m for t, m in WITH_PARTS if t == "t1"])
        await store.append_messages(session, "t2", [m for t, m in WITH_PARTS if t == "t2"])
        assert await store.load_history(session) == WITH_PARTS  # the cached history
        assert await other.load_history(session) == WITH_PARTS  # read back from the rows


async def test_a_text_only_message_stores_no_parts(store: AnyStore) -> None:
    session = await store.active_session(**SESSION)
    await store.append_messages(session, "t1", [Message("user", "hi")])
    rows = await store.messages_for_session(session)
    assert [row.parts for row in rows] == [None]


async def test_a_blob_is_kept_once_by_its_id(opener: Opener) -> None:
    data = bytes(range(256)) * 4  # every byte value: stored as bytes, not as text
    blob_id = blob_id_of(data)
    async with opener() as store, opener() as other:
        assert await store.get_blob(blob_id) is None
        await store.put_blob(blob_id, "image/png", data)
        await other.put_blob(blob_id, "image/png", data)  # the same bytes again: nothing new
        assert await other.get_blob(blob_id) == ("image/png", data)
        await store.put_blob(blob_id_of(b""), "text/plain", b"")
        assert await store.get_blob(blob_id_of(b"")) == ("text/plain", b"")


async def test_blobs_stored_before_a_cutoff_are_deleted(store: AnyStore) -> None:
    await store.put_blob("old", "text/plain", b"old")
    cutoff = time.time() + 1  # after the first: the clock is the store's, seconds are coarse
    assert await store.delete_blobs_before(cutoff - 3600) == 0
    assert await store.delete_blobs_before(cutoff) == 1
    assert await store.get_blob("old") is None
    assert await store.delete_blobs_before(cutoff) == 0


def _state(version: int, **changes: Any) -> ConversationStateRow:
    row = ConversationStateRow("websocket:c1", "agent", None, {"model": "fast"}, version, 1.5)
    return replace(row, **changes)


async def test_a_conversation_state_is_saved_by_compare_and_set(opener: Opener) -> None:
    async with opener() as store, opener() as other:
        assert await store.load_conversation_state("websocket:c1") is None
        assert await store.save_conversation_state(_state(1), expected_version=0)
        assert not await other.save_conversation_state(_state(1), expected_version=0)
        assert await other.load_conversation_state("websocket:c1") == _state(1)
        moved = _state(2, mode="human", assignee="agent-7", settings={"lang": "de"})
        assert await other.save_conversation_state(moved, expected_version=1)
        stale = _state(2, mode="agent")  # read version 1 before `other` moved it on
        assert not await store.save_conversation_state(stale, expected_version=1)
        assert await store.load_conversation_state("websocket:c1") == moved
        assert await store.load_conversation_state("websocket:other") is None


async def test_a_conversation_state_moves_on_by_one_version(store: AnyStore) -> None:
    with pytest.raises(ValueError, match="version"):
        await store.save_conversation_state(_state(3), expected_version=1)
    assert await store.load_conversation_state("websocket:c1") is None


async def test_many_writers_at_once_move_a_state_on_once(opener: Opener) -> None:
    async with opener() as one, opener() as two:
        assert await one.save_conversation_state(_state(1), expected_version=0)
        saved = await asyncio.gather(
            *(
                store.save_conversation_state(_state(2, assignee=str(n)), expected_version=1)
                for n, store in enumerate((one, two, one, two))
            )
        )
        assert saved.count(True) == 1
        winner = str(saved.index(True))
        assert await two.load_conversation_state("websocket:c1") == _state(2, assignee=winner)


async def test_a_turn_keeps_the_media_its_answer_went_out_with(opener: Opener) -> None:
    chart = ImagePart(BlobRef("d" * 64, "image/png", 20, "sales.png"))
    report = FilePart(BlobRef("e" * 64, "application/pdf", 7, "report.pdf"))
    async with opener() as store, opener() as other:
        session = await store.active_session(**SESSION)
        for turn_id in ("t1", "t2"):
            await store.create_turn(
                turn_id=turn_id,
                session_id=session,
                channel="telegram",
                conversation_key="telegram:42",
                inbound_event_ids=[turn_id],
                placeholder=None,
            )
        await store.finish_turn(
            "t1", status="completed", final_text="Here.", final_parts=(chart, report)
        )
        await store.finish_turn("t2", status="completed", final_text="Words only.")
        read = {
            t.id: t.final_parts
            for t in await other.recent_turns(
                channel="telegram", conversation_key="telegram:42", user_id="7"
            )
        }
        assert read == {"t1": (chart, report), "t2": ()}
        kept = await other.get_turn("t1")
        assert kept is not None and kept.final_parts == (chart, report)
