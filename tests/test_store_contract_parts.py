"""The store's part of issue 21, on both backends: messages keep their content parts.

Runs on SqliteStore and PostgresStore through the fixtures of tests/test_store_contract.py.
"""

from __future__ import annotations

from agent.types import Message
from bot.storage.backends import AnyStore
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
    assert [row["parts"] for row in rows] == [None]
