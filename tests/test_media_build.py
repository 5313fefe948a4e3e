"""Which blob store `media.store` makes, and a retention pass."""

from __future__ import annotations

import time
from pathlib import Path

from bot.media.build import DAY_S, build_blobs, retention_pass
from bot.media.records import RecordBlobStore
from bot.runtime.config.schema import MediaConfig
from bot.storage import SqliteStore
from bot.storage.backends import build_store
from content.disk import DiskBlobStore


def test_auto_is_disk_on_sqlite_and_the_database_on_postgresql(tmp_path: Path) -> None:
    sqlite = build_store(tmp_path / "bot.db", None)
    postgres = build_store("unused", "postgresql://db.internal:5432/bot")  # not opened
    auto = MediaConfig()
    on_disk = build_blobs(auto, tmp_path / "media", sqlite, on_postgresql=False)
    assert isinstance(on_disk, DiskBlobStore) and on_disk.root == tmp_path / "media"
    shared = build_blobs(auto, tmp_path / "media", postgres, on_postgresql=True)
    assert isinstance(shared, RecordBlobStore) and shared.records is postgres
    database = MediaConfig(store="database", max_bytes=5)
    chosen = build_blobs(database, tmp_path / "media", sqlite, on_postgresql=False)
    assert isinstance(chosen, RecordBlobStore) and chosen.max_bytes == 5
    disk = build_blobs(MediaConfig(store="disk"), tmp_path / "m", postgres, on_postgresql=True)
    assert isinstance(disk, DiskBlobStore)


async def test_a_retention_pass_removes_what_is_past_the_days(tmp_path: Path) -> None:
    now = [time.time()]
    async with SqliteStore(tmp_path / "bot.db") as store:
        blobs = RecordBlobStore(store, max_bytes=100, clock=lambda: now[0])
        old = await blobs.put(b"old", mime_type="text/plain")
        now[0] += 3 * DAY_S
        await blobs.put(b"new", mime_type="text/plain")
        assert await retention_pass(blobs, 30) == 0
        assert await retention_pass(blobs, 2) == 1
        assert await store.get_blob(old.blob_id) is None
