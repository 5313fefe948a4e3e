"""The `BlobStore` seam: where the bytes of non-text parts live.

Implementations: files on disk, content-addressed under the data folder (the embedded default),
and a store several hosts share (PostgreSQL's `blobs` table). One contract test runs every
implementation. Blob ids are the SHA-256 of the bytes, so the same file stored twice is one blob.

Errors::

    BlobError          any failure of the blob store
     ├── BlobTooLarge  more bytes than the store's `max_bytes`: nothing was kept
     └── BlobNotFound  no blob has that id (never stored, or expired by retention)
"""

from __future__ import annotations

import hashlib
from typing import Protocol

from content.parts import BlobRef


class BlobError(Exception):
    """The blob store failed or refused."""


class BlobTooLarge(BlobError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(
            f"file of {size} bytes is over the limit of {limit} bytes (media.max_bytes)"
        )
        self.size = size
        self.limit = limit


class BlobNotFound(BlobError):
    def __init__(self, blob_id: str) -> None:
        super().__init__(f"no blob {blob_id!r} (never stored, or removed by media.retention_days)")
        self.blob_id = blob_id


def blob_id_of(data: bytes) -> str:
    """The content address of `data`."""
    return hashlib.sha256(data).hexdigest()


class BlobStore(Protocol):
    """Keeps bytes by content address; parts carry the `BlobRef` that `put` returns."""

    @property
    def max_bytes(self) -> int:
        """The largest blob it keeps; channels check a declared size against it before
        downloading."""
        ...

    async def put(
        self, data: bytes, *, mime_type: str, name: str | None = None, source: str | None = None
    ) -> BlobRef:
        """Keep `data` (an existing blob of the same bytes is reused); `BlobTooLarge` over the cap."""
        ...

    async def get(self, blob_id: str) -> tuple[str, bytes]:
        """The blob's media type and bytes; `BlobNotFound` if there is none."""
        ...

    async def purge(self, older_than_s: float) -> int:
        """Remove blobs stored more than `older_than_s` seconds ago; how many went."""
        ...
