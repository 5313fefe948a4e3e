"""A blob store in memory for channel tests: the `BlobStore` seam with nothing behind it."""

from __future__ import annotations

from content.blobs import BlobNotFound, BlobTooLarge, blob_id_of
from content.parts import BlobRef


class MemoryBlobs:
    def __init__(self, max_bytes: int = 20_000_000) -> None:
        self._max_bytes = max_bytes
        self.blobs: dict[str, tuple[str, bytes]] = {}

    @property
    def max_bytes(self) -> int:
        return self._max_bytes

    async def put(
        self, data: bytes, *, mime_type: str, name: str | None = None, source: str | None = None
    ) -> BlobRef:
        if len(data) > self._max_bytes:
            raise BlobTooLarge(len(data), self._max_bytes)
        blob_id = blob_id_of(data)
        self.blobs.setdefault(blob_id, (mime_type, data))
        return BlobRef(blob_id, mime_type, len(data), name, source)

    async def get(self, blob_id: str) -> tuple[str, bytes]:
        try:
            return self.blobs[blob_id]
        except KeyError:
            raise BlobNotFound(blob_id) from None

    async def purge(self, older_than_s: float) -> int:
        return 0
