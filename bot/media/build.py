"""The blob store `media.store` chooses, its signed links, the key of client uploads, and its
retention task."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import time
from collections.abc import Callable
from pathlib import Path

from bot.media.links import HmacBlobLinks, link_secret
from bot.media.records import RecordBlobStore
from bot.runtime.config.schema import MediaConfig
from bot.storage import StorageError
from bot.storage.roles import BlobRecords
from content.blobs import BlobError, BlobStore
from content.disk import DiskBlobStore

log = logging.getLogger(__name__)

DAY_S = 86400.0
PURGE_EVERY_S = 3600.0


def build_blobs(
    config: MediaConfig, folder: Path, records: BlobRecords | None, *, on_postgresql: bool
) -> BlobStore:
    """Disk under `folder` (`media.dir`), or the database's `blobs` table (`records`)."""
    where = config.store
    if where == "auto":
        where = "database" if on_postgresql and records is not None else "disk"
    if where == "database":
        if records is None:
            raise ValueError("media.store: database needs a store with a blobs table")
        return RecordBlobStore(records, max_bytes=config.max_bytes)
    return DiskBlobStore(folder, max_bytes=config.max_bytes)


def build_links(
    config: MediaConfig, folder: Path, clock: Callable[[], float] = time.time
) -> HmacBlobLinks:
    return HmacBlobLinks(
        link_secret(config.url_secret, folder), ttl_s=config.url_ttl_s, clock=clock
    )


def upload_secret(config: MediaConfig, folder: Path) -> bytes:
    """The key of upload tokens and attachment references: derived from the links' secret
    (every process that shares the one shares the other), and not the same key."""
    return hmac.new(link_secret(config.url_secret, folder), b"uploads", hashlib.sha256).digest()


async def keep_retention(blobs: BlobStore, retention_days: float) -> None:
    """Remove blobs past `media.retention_days`, now and hourly, until cancelled."""
    while True:
        await retention_pass(blobs, retention_days)
        await asyncio.sleep(PURGE_EVERY_S)


async def retention_pass(blobs: BlobStore, retention_days: float) -> int:
    """One pass: how many blobs went. A failure of the store is logged and the next pass tries
    again (an unreachable database must not stop the app); anything else is a bug and ends the
    app's task group."""
    try:
        removed = await blobs.purge(retention_days * DAY_S)
    except (BlobError, StorageError, OSError) as exc:
        log.error("media retention: %s; trying again in %.0f s", exc, PURGE_EVERY_S)
        return 0
    if removed:
        log.info("media retention: %d file(s) older than %g days removed", removed, retention_days)
    return removed
