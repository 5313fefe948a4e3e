"""What every channel's file fetch shares: the size cap, checked before and during a download."""

from __future__ import annotations

import mimetypes
from collections.abc import AsyncIterator

from adapters.base import Attachment, FileTooLarge
from content.blobs import BlobStore, BlobTooLarge
from content.parts import BlobRef

OCTET_STREAM = "application/octet-stream"


def limit_for(blobs: BlobStore, platform_cap: int | None = None) -> int:
    """The most bytes a fetch may take: the store's cap, or the platform's where it is lower."""
    return blobs.max_bytes if platform_cap is None else min(blobs.max_bytes, platform_cap)


def check_declared(attachment: Attachment, limit: int) -> None:
    """Refuse from the size the event declared, before anything is downloaded."""
    if attachment.size is not None and attachment.size > limit:
        raise FileTooLarge(attachment, limit, attachment.size)


async def collect(chunks: AsyncIterator[bytes], attachment: Attachment, limit: int) -> bytes:
    """The chunks joined; `FileTooLarge` as soon as they pass `limit` (the caller stops the
    download: a size the event did not declare, or declared wrong, costs at most `limit`)."""
    buffer = bytearray()
    async for chunk in chunks:
        buffer += chunk
        if len(buffer) > limit:
            raise FileTooLarge(attachment, limit)
    return bytes(buffer)


# The types whose bytes say what they are: the bytes win over a name or a platform's label.
_MAGIC: tuple[tuple[bytes, int, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", 0, "image/png"),
    (b"\xff\xd8\xff", 0, "image/jpeg"),
    (b"GIF87a", 0, "image/gif"),
    (b"GIF89a", 0, "image/gif"),
    (b"WEBP", 8, "image/webp"),
    (b"%PDF-", 0, "application/pdf"),
    (b"OggS", 0, "audio/ogg"),
)


def sniffed(data: bytes) -> str | None:
    for magic, offset, mime in _MAGIC:
        if data[offset : offset + len(magic)] == magic:
            if mime == "image/webp" and not data.startswith(b"RIFF"):
                continue
            return mime
    return None


def media_type(attachment: Attachment, declared: str | None = None, data: bytes = b"") -> str:
    """The media type to store under: the bytes' where they tell, else the platform's, else the
    one the name implies. An SVG is stored as a file (it can carry scripts)."""
    mime = sniffed(data) or declared or attachment.mime_type
    if (not mime or mime.startswith(OCTET_STREAM)) and attachment.name:
        mime = mimetypes.guess_type(attachment.name, strict=False)[0]
    mime = (mime or OCTET_STREAM).split(";", 1)[0].strip().lower()
    return OCTET_STREAM if mime == "image/svg+xml" else mime


async def keep(
    blobs: BlobStore,
    data: bytes,
    attachment: Attachment,
    *,
    source: str,
    mime_type: str | None = None,
) -> BlobRef:
    """Put what was downloaded in the store; its own cap refusing is `FileTooLarge` too."""
    try:
        return await blobs.put(
            data,
            mime_type=media_type(attachment, mime_type, data),
            name=attachment.name,
            source=source,
        )
    except BlobTooLarge as exc:
        raise FileTooLarge(attachment, exc.limit, exc.size) from None


def file_name(blob: BlobRef, default_stem: str = "file") -> str:
    """The name a file goes out under: its own, else one its media type implies."""
    if blob.name:
        return blob.name
    extension = mimetypes.guess_extension(blob.mime_type, strict=False) or ""
    return f"{default_stem}{extension}"
