"""The WAL's pages that the kernel dropped from memory are read back before the WAL starts over.

SQLite writes each WAL frame across two of the file's pages; a write to part of a page that is
not in memory reads it from disk first, and those writes are the event loop's. A kernel short
of memory, or a host reclaiming a VM's page cache, drops the WAL's pages once written back, so
the checkpoint thread asks for them again before the loop writes them: before a RESTART, and
after a checkpoint that copied all of the WAL (the next write starts it over).
"""

from __future__ import annotations

import asyncio
import ctypes
import mmap
import os
from pathlib import Path

import pytest

from agent.types import Message
from bot.storage import SqliteStore

pytestmark = pytest.mark.skipif(
    not hasattr(os, "posix_fadvise"), reason="posix_fadvise and mincore: Linux"
)
KEY = {"channel": "websocket", "conversation_key": "chat-1", "user_id": "user-1"}
PAGE = mmap.PAGESIZE


def _in_memory(path: Path) -> float:
    """The share of the file's pages in the page cache (mincore on a mapping that reads none)."""
    size = path.stat().st_size
    pages = (size + PAGE - 1) // PAGE
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    with open(path, "rb") as file, mmap.mmap(file.fileno(), size, access=mmap.ACCESS_COPY) as m:
        vector = (ctypes.c_ubyte * pages)()
        start = ctypes.c_char.from_buffer(m)
        try:
            if libc.mincore(ctypes.addressof(start), size, vector) != 0:
                raise OSError(ctypes.get_errno(), "mincore")
        finally:
            del start  # the mapping closes only once nothing points into it
    return sum(byte & 1 for byte in vector) / pages


def _drop_from_memory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # written back first: a dirty page is not dropped
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


async def _checkpoint(store: SqliteStore) -> None:
    store._request_checkpoint()
    assert store._checkpoint is not None
    await asyncio.wrap_future(store._checkpoint)


async def _back_in_memory(wal: Path) -> float:
    for _ in range(100):  # the read-ahead runs in the kernel: it may still be under way
        if _in_memory(wal) > 0.9:
            break
        await asyncio.sleep(0.02)
    return _in_memory(wal)


async def _written_and_dropped(store: SqliteStore, wal: Path) -> str:
    """A session of 40 page-sized messages (~80 frames), all copied, and its WAL's pages dropped
    from memory (a checkpoint of them reads none: they are copied)."""
    session_id = await store.active_session(**KEY)
    for n in range(40):
        await store.append_messages(session_id, f"t{n}", [Message("user", "x" * PAGE)])
    await _checkpoint(store)
    _drop_from_memory(wal)
    if _in_memory(wal) > 0.5:
        pytest.skip(f"the file system of {wal.parent} keeps the WAL's pages in memory (tmpfs?)")
    return session_id


async def test_the_wal_pages_dropped_from_memory_are_read_back_before_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.storage import connection

    monkeypatch.setattr(connection, "RESTART_AT_FRAMES", 10_000)
    wal = tmp_path / "bot.db-wal"
    async with SqliteStore(tmp_path / "bot.db") as store:
        session_id = await _written_and_dropped(store, wal)
        assert store.restarts == 0
        monkeypatch.setattr(connection, "RESTART_AT_FRAMES", 8)
        await _checkpoint(store)
        assert store.restarts == 1
        assert await _back_in_memory(wal) > 0.9
        await store.append_messages(session_id, "t40", [Message("user", "40")])
        history = await store.load_history(session_id)
    assert len(history) == 41


async def test_a_quiet_wal_all_copied_is_read_back_before_the_next_write_starts_it_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no RESTART (a quiet load: every checkpoint copies all), the next write starts the
    WAL over at its beginning: the checkpoint that found it all copied reads it back too."""
    from bot.storage import connection

    monkeypatch.setattr(connection, "RESTART_AT_FRAMES", 10_000)
    wal = tmp_path / "bot.db-wal"
    async with SqliteStore(tmp_path / "bot.db") as store:
        session_id = await _written_and_dropped(store, wal)
        await _checkpoint(store)  # nothing new to copy: no page of the WAL read for that
        assert store.restarts == 0
        assert await _back_in_memory(wal) > 0.9
        await store.append_messages(session_id, "t40", [Message("user", "40")])
        history = await store.load_history(session_id)
    assert len(history) == 41
