"""`RecordBlobStore`: blobs in the database's `blobs` table, so every host on one PostgreSQL
shares them (`media.store: database`, the `auto` choice on PostgreSQL).

The table's rows are written through the store's `BlobRecords` role (bot/storage/base.py),
stamped with this store's clock, which retention compares them with (tests drive it).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from bot.storage.roles import BlobRecords
from content.blobs import BlobNotFound, BlobTooLarge, blob_id_of
from content.parts import BlobRef


class RecordBlobStore:
    """A `BlobStore` (content/blobs.py) over a store's `BlobRecords`."""

    def __init__(
        self, records: BlobRecords, *, max_bytes: int, clock: Callable[[], float] = time.time
    ) -> None:
        self.records = records
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
        await self.records.put_blob(blob_id, mime_type, data, stored_at=self._clock())
        return BlobRef(blob_id, mime_type, len(data), name, source)

    async def get(self, blob_id: str) -> tuple[str, bytes]:
        found = await self.records.get_blob(blob_id)
        if found is None:
            raise BlobNotFound(blob_id)
        return found

    async def purge(self, older_than_s: float) -> int:
        return await self.records.delete_blobs_before(self._clock() - older_than_s)
