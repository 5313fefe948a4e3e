"""The sessions API's records: one contract for the in-process, SQLite and PostgreSQL ones;
its config section and the `bot api-key` command."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.api.keys import KeyRing, hash_key
from adapters.api.records import ApiMessage, ApiSession, MemorySessionRecords, SessionRecords
from bot.runtime.cli import main
from bot.runtime.config import ConfigError
from bot.storage.backends import build_store
from content.parts import BlobRef, FilePart, ImagePart
from tests.conftest import make_config
from tests.pg_kit import pg_database, pg_url

__all__ = ["pg_database", "pg_url"]  # fixtures the contract uses


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest) -> tuple[str, str | None]:
    """The implementation, with its database URL (a sync fixture: pg_url runs its own loop)."""
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    return request.param, url


@pytest.fixture
async def records(backend: tuple[str, str | None], tmp_path: Path) -> AsyncIterator[SessionRecords]:
    kind, url = backend
    if kind == "memory":
        yield MemorySessionRecords()
        return
    store = build_store(tmp_path / "bot.db", url)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


async def test_sessions_are_kept_with_their_owner(records: SessionRecords) -> None:
    await records.create_api_session(ApiSession("s_1", "a", "42"))
    await records.create_api_session(ApiSession("s_2", "b"))
    one = await records.api_session("s_1")
    assert one is not None and (one.key_id, one.user_id) == ("a", "42")
    two = await records.api_session("s_2")
    assert two is not None and two.user_id is None
    assert await records.api_session("s_3") is None


async def test_a_message_added_again_is_updated_in_its_place(records: SessionRecords) -> None:
    await records.create_api_session(ApiSession("s_1", "a"))
    user = await records.add_api_message(ApiMessage("s_1", "c1", "user", "hi", "received", seq=4))
    bot = await records.add_api_message(
        ApiMessage("s_1", "m_1", "assistant", "…", "pending", reply_to="c1")
    )
    later = await records.add_api_message(ApiMessage("s_1", "c2", "user", "more", "received"))
    hint = {"type": "alert", "level": "info", "text": "note"}
    done = await records.add_api_message(
        ApiMessage("s_1", "m_1", "assistant", "hello", "completed", display=(hint,))
    )
    assert user.position < bot.position < later.position
    assert done.position == bot.position and done.reply_to == "c1"
    kept = await records.api_messages("s_1", limit=10)
    assert [(m.message_id, m.text, m.status) for m in kept] == [
        ("c1", "hi", "received"),
        ("m_1", "hello", "completed"),
        ("c2", "more", "received"),
    ]
    assert kept[1].display == (hint,) and kept[0].seq == 4
    reply = await records.api_reply("s_1", "c1")
    assert reply is not None and (reply.message_id, reply.status) == ("m_1", "completed")
    assert await records.api_reply("s_1", "c2") is None
    found = await records.api_message("s_1", "c1")
    assert found is not None and found.position == user.position
    assert await records.api_message("s_1", "nope") is None


async def test_a_messages_files_are_kept_and_completed_with_it(records: SessionRecords) -> None:
    photo = ImagePart(BlobRef("a" * 64, "image/jpeg", 12, "cat.jpg", "api"))
    chart = FilePart(BlobRef("b" * 64, "application/pdf", 7, "chart.pdf"))
    await records.create_api_session(ApiSession("s_1", "a"))
    await records.add_api_message(ApiMessage("s_1", "c1", "user", "", "received", parts=(photo,)))
    await records.add_api_message(ApiMessage("s_1", "m_1", "assistant", "…", "pending"))
    await records.add_api_message(
        ApiMessage("s_1", "m_1", "assistant", "Drawn.", "completed", parts=(chart,))
    )
    kept = await records.api_messages("s_1", limit=10)
    assert [(m.message_id, m.parts) for m in kept] == [("c1", (photo,)), ("m_1", (chart,))]


async def test_pages_are_in_order_and_per_session(records: SessionRecords) -> None:
    for sid in ("s_1", "s_2"):
        await records.create_api_session(ApiSession(sid, "a"))
    added = []
    for n in range(7):
        added.append(
            await records.add_api_message(ApiMessage("s_1", f"c{n}", "user", f"{n}", "received"))
        )
        await records.add_api_message(ApiMessage("s_2", f"c{n}", "user", "other", "received"))

    def texts(messages: list[ApiMessage]) -> list[str]:
        return [m.text for m in messages]

    assert texts(await records.api_messages("s_1", limit=3)) == ["4", "5", "6"]
    assert texts(await records.api_messages("s_1", limit=3, before=added[4].position)) == [
        "1",
        "2",
        "3",
    ]
    assert texts(await records.api_messages("s_1", limit=3, after=added[1].position)) == [
        "2",
        "3",
        "4",
    ]
    assert texts(await records.api_messages("s_1", limit=100, after=0)) == [
        str(n) for n in range(7)
    ]
    between = await records.api_messages(
        "s_1", limit=2, after=added[1].position, before=added[5].position
    )
    assert texts(between) == ["2", "3"]
    between = await records.api_messages(
        "s_1", limit=9, after=added[1].position, before=added[5].position
    )
    assert texts(between) == ["2", "3", "4"]
    assert await records.api_messages("s_3", limit=5) == []


def test_the_api_is_off_by_default_and_needs_keys_when_on(tmp_path: Path) -> None:
    assert make_config(tmp_path).channels.api.enabled is False
    with pytest.raises(ConfigError, match="channels.api"):
        make_config(tmp_path, channels={"api": {"enabled": True}})
    with pytest.raises(ConfigError, match="sha256"):
        make_config(
            tmp_path,
            channels={"api": {"enabled": True, "keys": [{"id": "a", "sha256": "gk_plain-key"}]}},
        )


def test_bot_api_key_new_prints_a_key_whose_hash_it_prints_for_the_config(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert main(["api-key", "new", "--id", "site-a"]) == 0
    out = capsys.readouterr().out
    key = out.split("stored anywhere): ")[1].split()[0]
    digest = out.split("sha256: ")[1].split("}")[0]
    assert hash_key(key) == digest and key not in out.split("keys:")[1]
    config = make_config(
        tmp_path, channels={"api": {"enabled": True, "keys": [{"id": "site-a", "sha256": digest}]}}
    )
    ring = KeyRing((k.id, k.sha256) for k in config.channels.api.keys)
    assert ring.owner(f"Bearer {key}") == "site-a"
    monkeypatch.setattr("sys.stdin", io.StringIO(key + "\n"))
    assert main(["api-key", "hash"]) == 0
    assert capsys.readouterr().out.strip() == digest
