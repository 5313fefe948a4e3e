"""`DiskBlobStore` beyond the contract: where a blob's file lives, and what a killed write leaves."""

from __future__ import annotations

import os
from pathlib import Path

from content.blobs import blob_id_of
from content.disk import DiskBlobStore

DAY = 86400.0


async def test_a_blob_is_one_file_in_two_levels_of_folders(tmp_path: Path) -> None:
    store = DiskBlobStore(tmp_path, max_bytes=100)
    ref = await store.put(b"photo", mime_type="image/jpeg")
    path = tmp_path / ref.blob_id[:2] / ref.blob_id[2:4] / ref.blob_id
    assert path.read_bytes() == b"image/jpeg\nphoto"
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == [path]  # no temporary file left


async def test_a_write_cut_short_leaves_a_temporary_file_that_retention_removes(
    tmp_path: Path,
) -> None:
    now = [1_000_000.0]
    store = DiskBlobStore(tmp_path, max_bytes=100, clock=lambda: now[0])
    blob_id = blob_id_of(b"half")
    folder = tmp_path / blob_id[:2] / blob_id[2:4]
    folder.mkdir(parents=True)
    leftover = folder / ".tmp-killed"
    leftover.write_bytes(b"image/png\nha")  # a process killed between write and rename
    os.utime(leftover, (now[0], now[0]))
    kept = await store.put(b"kept", mime_type="text/plain")
    now[0] += 2 * DAY
    assert await store.purge(DAY) == 1  # the blob; the temporary file goes too, uncounted
    assert not leftover.exists()
    assert not (tmp_path / kept.blob_id[:2] / kept.blob_id[2:4] / kept.blob_id).exists()


async def test_a_store_that_never_wrote_purges_nothing(tmp_path: Path) -> None:
    assert await DiskBlobStore(tmp_path / "never", max_bytes=1).purge(0) == 0
