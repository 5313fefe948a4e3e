"""`GET /media/<blob id>`: a blob's bytes for a signed link, refused (403) for any other.

Files are untrusted input: nothing served here may run in our origin. Every answer says
`nosniff` and a CSP that allows nothing (and sandboxes a document opened anyway); only raster
images are shown inline, everything else (an SVG included: it can hold script) downloads.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from aiohttp import web

from bot.media.links import ROUTE, HmacBlobLinks
from content.blobs import BlobNotFound, BlobStore

INLINE = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "image/avif"})
_MEDIA_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*")
SAFETY = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; sandbox",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Resource-Policy": "same-site",
}


class MediaRoute:
    """Serves the blobs of `blobs` for links `links` signed."""

    def __init__(self, blobs: BlobStore, links: HmacBlobLinks) -> None:
        self.blobs = blobs
        self.links = links

    def install(self, app: web.Application) -> None:
        app.router.add_get(ROUTE, self._serve)

    async def _serve(self, request: web.Request) -> web.Response:
        blob_id = request.match_info["blob_id"]
        query = request.query
        expires, signature, name = query.get("exp", ""), query.get("sig", ""), query.get("name", "")
        if not self.links.admits(blob_id, expires, signature, name):
            raise web.HTTPForbidden(text="this link is not valid, or has expired\n", headers=SAFETY)
        try:
            mime_type, data = await self.blobs.get(blob_id)
        except BlobNotFound:
            raise web.HTTPNotFound(text="this file is no longer kept\n", headers=SAFETY) from None
        mime_type = mime_type.lower()
        if not _MEDIA_TYPE.fullmatch(mime_type):
            mime_type = "application/octet-stream"
        how = "inline" if mime_type in INLINE else "attachment"
        disposition = f"{how}; filename*=UTF-8''{quote(name)}" if name else how
        headers = SAFETY | {
            "Content-Disposition": disposition,
            "Cache-Control": f"private, max-age={self.links.remaining_s(expires)}",
        }
        return web.Response(body=data, content_type=mime_type, headers=headers)
