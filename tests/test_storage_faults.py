"""Storage faults as they happen: a full disk mid-turn, a lock held by another process, a bad file."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import aiohttp
import pytest

from adapters.base import ChannelLimits, ChatRef, InboundMessage
from agent.providers.scripted import Reply, ScriptedProvider
from bot.pipeline.turn import STORAGE_FAILED
from bot.runtime.app import App
from bot.storage import SqliteStore, StorageError
from tests.conftest import Running
from tests.fakes import RecordingChannel

ROOT = Path(__file__).resolve().parent.parent
LIMITS = ChannelLimits(max_text_length=4096, min_edit_interval_s=0.05)
LOCK_S = 1.5  # how long another process holds the write lock


def _msg(text: str, event: str) -> InboundMessage:
    return InboundMessage(ChatRef("fake", "dm-u1"), "u1", text, event, f"msg-{event}")


def sqlite(app: App) -> SqliteStore:
    assert isinstance(app.store, SqliteStore), "these faults are SQLite's"
    return app.store


async def fill_the_disk(store: SqliteStore) -> None:
    """SQLite's own disk-full path (SQLITE_FULL): the file may not grow past the pages it has,
    and the sessions table's pages are filled by other conversations until it is full."""
    store._conn.execute("PRAGMA max_page_count = 1")  # never below its size: it stays as it is
    for n in range(10_000):
        try:
            await store.create_session(
                agent_id="default", channel="fake", conversation_key=f"other-{n}", user_id="u9"
            )
        except StorageError as exc:
            assert "full" in str(exc)
            return
    raise AssertionError("the disk never filled")


def free_the_disk(store: SqliteStore) -> None:
    store._conn.execute("PRAGMA max_page_count = 1073741823")


async def health(session: aiohttp.ClientSession, app: App) -> tuple[int, dict[str, str]]:
    async with session.get(f"{app.url}/healthz") as response:
        return response.status, await response.json()


async def test_a_full_disk_mid_turn_ends_the_placeholder_and_asks_to_send_again(
    running: Running, session: aiohttp.ClientSession, caplog: pytest.LogCaptureFixture
) -> None:
    channel = RecordingChannel(LIMITS)
    provider = ScriptedProvider([Reply("answered after all")])
    app = await running(provider, channels=[channel])
    await fill_the_disk(sqlite(app))
    caplog.set_level(logging.INFO)

    await app.gateway.handle(_msg("please remember this", "e1"))
    await app.gateway.wait_idle()

    # the turn is recorded before its placeholder is posted: the note comes alone, nothing hangs
    (note,) = channel.calls
    assert (note.kind, note.text) == ("send", STORAGE_FAILED)
    assert note.final and not provider.requests
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]  # logged once, naming what is lost
    assert "fake:dm-u1" in errors[0].getMessage() and "e1" in errors[0].getMessage()
    assert "failed to deliver" not in caplog.text

    status, body = await health(session, app)
    assert status == 503 and "full" in body["storage"]

    free_the_disk(sqlite(app))
    await app.gateway.handle(_msg("please remember this", "e1"))  # the platform's retry
    await app.gateway.wait_idle()
    assert channel.calls[-1].text == "answered after all"  # its claim was released
    status, body = await health(session, app)
    assert status == 200 and "storage" not in body


async def test_a_storage_failure_after_the_answer_is_recorded_in_the_log_once(
    running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    """The user's words could not be kept (a long message needs new pages): they hear it."""
    channel = RecordingChannel(LIMITS)
    provider = ScriptedProvider([Reply("an answer that cannot be kept")])
    app = await running(provider, channels=[channel])
    await app.gateway.handle(_msg("hello", "e0"))  # the session and its first turn fit
    await app.gateway.wait_idle()
    sqlite(app)._conn.execute("PRAGMA max_page_count = 1")
    caplog.set_level(logging.ERROR)

    await app.gateway.handle(_msg("a long story " * 2000, "e1"))
    await app.gateway.wait_idle()

    assert channel.calls[-1].text == STORAGE_FAILED and channel.calls[-1].final
    assert len(caplog.records) == 1 and "e1" in caplog.records[0].getMessage()


@contextmanager
def locked_by_another_process(path: Path, hold_s: float | None) -> Iterator[threading.Event]:
    """Another connection holds the write lock for `hold_s` (or until the event is set)."""
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with sqlite3.connect(path, isolation_level=None) as other:
            other.execute("BEGIN EXCLUSIVE")
            taken.set()
            release.wait(hold_s)
            other.execute("COMMIT")

    thread = threading.Thread(target=hold)
    thread.start()
    taken.wait(5)
    try:
        yield release
    finally:
        release.set()
        thread.join()


class StallMeter:
    """Ticks on the loop; the longest gap between ticks is the longest the loop was frozen."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._last = time.monotonic()
        self._task = asyncio.create_task(self._tick())

    def _note(self) -> None:
        now = time.monotonic()
        self.longest = max(self.longest, now - self._last)
        self._last = now

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(0.005)
            self._note()

    async def stop(self) -> float:
        self._note()  # a stall just before the stop counts too
        self._task.cancel()
        await asyncio.wait([self._task])
        return self.longest


async def test_a_lock_held_by_another_process_never_freezes_the_loop(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "bot.db") as store:
        assert await store.claim_event("before", 60)
        with locked_by_another_process(tmp_path / "bot.db", LOCK_S):
            meter = StallMeter()
            started = time.monotonic()
            claimed, second = await asyncio.gather(
                store.claim_event("during", 60),  # meets the lock, waits for it off the loop
                store.claim_event("during", 60),  # queued behind it, in order
            )
            waited = time.monotonic() - started
            stall = await meter.stop()
        assert (claimed, second) == (True, False)
        assert waited > LOCK_S / 2  # it did wait for the lock
        assert stall < LOCK_S / 3, f"the loop froze for {stall:.3f} s"
        assert await store.claim_event("after", 60)  # back on the loop
        assert store.trouble is None


async def test_a_lock_held_too_long_fails_the_call_until_it_is_released(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "bot.db") as store:
        store.busy_wait_s = 0.2
        with locked_by_another_process(tmp_path / "bot.db", None) as release:
            meter = StallMeter()
            with pytest.raises(StorageError, match="locked"):
                await store.claim_event("during", 60)
            assert await meter.stop() < 0.15
            assert store.trouble is not None and "locked" in store.trouble
            release.set()
        assert await store.claim_event("during", 60)
        assert store.trouble is None


async def test_healthz_answers_while_another_conversation_waits_for_a_lock(
    running: Running, session: aiohttp.ClientSession
) -> None:
    channel = RecordingChannel(LIMITS)
    app = await running(ScriptedProvider([Reply("done")]), channels=[channel])
    path = Path(sqlite(app).path)
    with locked_by_another_process(path, LOCK_S):
        waiting = asyncio.create_task(app.gateway.handle(_msg("hi", "e1")))  # claims: waits
        started = time.monotonic()
        status, _ = await health(session, app)
        answered_in = time.monotonic() - started
        assert status == 200 and not waiting.done()
        assert answered_in < LOCK_S / 3
        await waiting
    await app.gateway.wait_idle()
    assert channel.calls[-1].text == "done"


# -- at start: one line naming storage.path, exit 2 ------------------------------------------


def _unusable_storage(tmp_path: Path, fault: str) -> str:
    """Faults that stop even root: chmod does not."""
    match fault:
        case "a file where its folder should be":
            (tmp_path / "afile").write_text("not a folder")
            return "afile/bot.db"
        case "a file that is not SQLite":
            (tmp_path / "bot.db").write_bytes(b"\x00garbage, not a database\xff" * 200)
            return "bot.db"
        case "a folder where the file should be":
            (tmp_path / "bot.db").mkdir()
            return "bot.db"
    raise AssertionError(fault)


FAULTS = {
    "a file where its folder should be": "File exists",
    "a file that is not SQLite": "file is not a database",
    "a folder where the file should be": "is a folder",  # found by the config check already
}


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.process
def test_unusable_storage_stops_the_start_with_one_line_and_exit_2(
    tmp_path: Path, fault: str
) -> None:
    storage = _unusable_storage(tmp_path, fault)
    config = {"storage": {"path": storage}, "server": {"port": 0}, "log": {"level": "WARNING"}}
    (tmp_path / "config.yaml").write_text(json.dumps(config))
    result = subprocess.run(
        [sys.executable, "-m", "bot", "serve"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=30,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and "storage.path: " in line and storage in line
    assert FAULTS[fault] in line and "cannot serve" not in line


async def test_a_message_that_cannot_even_be_claimed_is_answered_honestly(
    running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    from bot.pipeline.gateway import NOT_TAKEN

    channel = RecordingChannel(LIMITS)
    provider = ScriptedProvider([])
    app = await running(provider, channels=[channel])
    sqlite(app)._conn.execute("PRAGMA max_page_count = 1")  # never below its size: it stays
    for n in range(100_000):  # fill the last pages with claims until not even one more fits
        try:
            await app.store.claim_event(f"filler-{n}", 60)
        except StorageError:
            break
    caplog.set_level(logging.ERROR)
    await app.gateway.handle(_msg("hello?", "e-full"))
    assert [(c.kind, c.text) for c in channel.calls] == [("send", NOT_TAKEN)]
    assert not provider.requests
    assert any("e-full" in r.getMessage() for r in caplog.records)
