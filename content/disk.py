"""`DiskBlobStore`: blobs as files under the data folder, content-addressed, written atomically.

A blob lives at `<root>/<id[0:2]>/<id[2:4]>/<id>`: two levels of 256 folders keep any one folder
small at millions of files. The file is one line with the media type, then the bytes, so a blob
and its type appear together in one rename: a reader never sees a blob without its type, and a
process killed mid-write leaves only a temporary file (`.tmp-*`), which retention removes. The
file's modification time is when it was stored (from the store's clock, so tests drive it).

Disk work runs in a thread: a 20 MB write or a purge walking the tree never stalls the loop.
"""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from content.blobs import BlobNotFound, BlobTooLarge, blob_id_of
from content.parts import BlobRef

_BLOB_ID = re.compile(r"[0-9a-f]{64}")
_TEMP = ".tmp-"


class DiskBlobStore:
    """The embedded default `BlobStore` (content/blobs.py), under `root` (`media.dir`)."""

    def __init__(
        self, root: Path, *, max_bytes: int, clock: Callable[[], float] = time.time
    ) -> None:
        self.root = root
        self._max_bytes = max_bytes
        self._clock = clock

    @property
    def max_bytes(self) -> int:
        return self._max_bytes

    async def put(
        self, data: bytes, *, mime_type: str, name: str | None = None, source: str | None = None
    ) -> BlobRef:
        if len(data) > self._max_bytes:
            raise BlobTooLarge(len(data), self._max_bytes)
        blob_id = blob_id_of(data)
        await asyncio.to_thread(self._write, blob_id, mime_type, data, self._clock())
        return BlobRef(blob_id, mime_type, len(data), name, source)

    async def get(self, blob_id: str) -> tuple[str, bytes]:
        if not _BLOB_ID.fullmatch(blob_id):  # never a path: an id names a file only by its hash
            raise BlobNotFound(blob_id)
        try:
            stored = await asyncio.to_thread(self._path(blob_id).read_bytes)
        except FileNotFoundError:
            raise BlobNotFound(blob_id) from None
        mime_type, _, data = stored.partition(b"\n")
        return mime_type.decode(), data

    async def purge(self, older_than_s: float) -> int:
        return await asyncio.to_thread(self._purge, self._clock() - older_than_s)

    def _path(self, blob_id: str) -> Path:
        return self.root / blob_id[:2] / blob_id[2:4] / blob_id

    def _write(self, blob_id: str, mime_type: str, data: bytes, stored_at: float) -> None:
        path = self._path(blob_id)
        if path.exists():
            return  # the same bytes: one blob (its first media type and time stand)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=_TEMP, dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(mime_type.encode() + b"\n")
                file.write(data)
                file.flush()
                os.fsync(file.fileno())  # a history row will point at it: it must survive a crash
            os.utime(temp, (stored_at, stored_at))
            os.replace(temp, path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise

    def _purge(self, cutoff: float) -> int:
        removed = 0
        for path in self._files():
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed += not path.name.startswith(_TEMP)
            except FileNotFoundError:
                pass  # another process purging the same folder took it first
        return removed

    def _files(self) -> Iterator[Path]:
        if not self.root.is_dir():
            return
        for first in self.root.iterdir():
            if first.is_dir() and len(first.name) == 2:
                for second in first.iterdir():
                    if second.is_dir():
                        yield from (p for p in second.iterdir() if p.is_file())
