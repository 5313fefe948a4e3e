"""Blobs in the store's database (the `blobs` table): bytes by content address, both backends."""

from __future__ import annotations

import time

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert

from bot.storage.query import Query, params
from bot.storage.tables import blobs
from bot.storage.tx import StoreCalls, Tx

_PUT = Query(
    insert(blobs)
    .values(params("blob_id", "mime_type", "size", "created_at", "data"))
    .on_conflict_do_nothing(index_elements=[blobs.c.blob_id])
)
_GET = Query(
    sa.select(blobs.c.mime_type, blobs.c.data).where(blobs.c.blob_id == sa.bindparam("blob_id"))
)
_DELETE_BEFORE = Query(sa.delete(blobs).where(blobs.c.created_at < sa.bindparam("cutoff")))


class BlobTable(StoreCalls):
    """`BlobRecords` (bot/storage/base.py): one statement a call."""

    async def put_blob(
        self, blob_id: str, mime_type: str, data: bytes, *, stored_at: float | None = None
    ) -> None:
        """Keeps the bytes under `blob_id` (their sha256, the caller's); an existing id: no-op."""
        await self._tx(_put, blob_id, mime_type, data, stored_at)

    async def get_blob(self, blob_id: str) -> tuple[str, bytes] | None:
        """(mime_type, data), or None when no blob has that id."""
        return await self._tx(_get, blob_id)

    async def delete_blobs_before(self, cutoff: float) -> int:
        """Deletes the blobs stored before `cutoff` (unix seconds); how many there were."""
        return await self._tx(_delete_before, cutoff)


async def _put(
    tx: Tx, /, blob_id: str, mime_type: str, data: bytes, stored_at: float | None
) -> None:
    stamp = time.time() if stored_at is None else stored_at  # unix s, as retention's cutoff
    await tx.execute(
        _PUT, blob_id=blob_id, mime_type=mime_type, size=len(data), created_at=stamp, data=data
    )


async def _get(tx: Tx, /, blob_id: str) -> tuple[str, bytes] | None:
    row = await tx.fetchone(_GET, blob_id=blob_id)
    return None if row is None else (row[0], bytes(row[1]))


async def _delete_before(tx: Tx, /, cutoff: float) -> int:
    return await tx.execute(_DELETE_BEFORE, cutoff=cutoff)
