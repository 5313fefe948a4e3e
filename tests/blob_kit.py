"""A blob store in memory for channel tests: the `BlobStore` seam with nothing behind it."""

from __future__ import annotations

import io
from typing import Any
from urllib.parse import quote

import aiohttp
from aiohttp import web
from PIL import Image

from content.blobs import BlobNotFound, BlobTooLarge, blob_id_of
from content.parts import BlobRef


def png(width: int = 8, height: int = 8, color: str = "teal") -> bytes:
    """A real PNG of that size (platforms that read an image's dimensions read these)."""
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), color).save(buffer, "PNG")
    return buffer.getvalue()


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

    def limit_to(self, max_bytes: int) -> None:
        """A smaller cap from now on (the channel keeps the store it was given)."""
        self._max_bytes = max_bytes


class PlainLinks:
    """`BlobLinks` for tests: a link names its blob (the real ones are signed, bot/media)."""

    def link(self, blob_id: str, name: str | None = None) -> str:
        return f"/media/{blob_id}" + (f"?name={quote(name)}" if name else "")


def serve_media(app: web.Application, blobs: MemoryBlobs) -> None:
    """`GET /media/<blob id>`: what the links above open."""

    async def media(request: web.Request) -> web.Response:
        try:
            mime, data = await blobs.get(request.match_info["blob_id"])
        except BlobNotFound:
            raise web.HTTPNotFound() from None
        return web.Response(body=data, content_type=mime)

    app.router.add_get("/media/{blob_id}", media)


async def fetched_attachments(
    http: aiohttp.ClientSession, base: str, frames: list[dict[str, Any]]
) -> list[tuple[str, bytes]]:
    """The files the frames' `attachments` link to, as a client downloads them: (name, bytes)."""
    files = []
    for frame in frames:
        if frame["type"] != "message.completed":
            continue
        for attachment in frame.get("attachments", []):
            async with http.get(base + attachment["url"]) as response:
                assert response.status == 200, attachment
                files.append((attachment["name"], await response.read()))
    return files
