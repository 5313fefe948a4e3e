"""Files clients upload (the widget, the sessions API): read capped into the blob store (typed
by their bytes where these tell, not by the client's word), and the signed references a later
message uses to attach them.

An upload answers with the blob's part (`{"type", "blob_id", "mime_type", "size", "name"}`) and
a `ref`: an HMAC over the conversation it was uploaded for and those fields. A message's
`attachments` echo those objects; a reference that does not verify for the message's own
conversation is refused, so one conversation cannot attach (and so read) another's file, and
nothing is kept on the server between the two requests (any process may take either).

The widget's upload token (`ready.upload.token`) is the same kind of HMAC over the conversation
and an expiry: a socket's conversation may upload for `ttl_s`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import mimetypes
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aiohttp import BodyPartReader, web
from aiohttp.http_exceptions import HttpProcessingError

from adapters.base import BlobLinks
from adapters.media import sniffed
from content.blobs import BlobStore, BlobTooLarge
from content.parts import (
    AudioPart,
    BlobRef,
    MediaPart,
    Part,
    PartError,
    TextPart,
    media_part,
    part_from_json,
    part_to_json,
)

OCTET_STREAM = "application/octet-stream"
CHUNK = 65536
MAX_NAME_CHARS = 255
# image types whose bytes `sniffed` knows: one of these whose bytes say otherwise is not one
SNIFFED_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
MAX_FIELDS = 8  # multipart fields read looking for `file`


class UploadRefused(Exception):
    """An upload or an attachment reference we refuse; `status` is the HTTP answer's."""

    def __init__(self, status: int, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after  # seconds, for a 429


class UploadSigner:
    """Upload tokens and attachment references for one secret (shared by every process that
    must accept another's: `None` makes one for this process alone)."""

    def __init__(
        self,
        secret: bytes | None = None,
        *,
        ttl_s: float = 900,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._secret = secret or secrets.token_bytes(32)
        self.ttl_s = ttl_s
        self._clock = clock

    def token(self, scope: str) -> str:
        expires = str(int(self._clock() + self.ttl_s))
        scope_b64 = base64.urlsafe_b64encode(scope.encode()).rstrip(b"=").decode()
        return f"{scope_b64}.{expires}.{self._sign('token', scope, expires)}"

    def scope_of(self, token: str) -> str | None:
        """The conversation a token was given to, None if it is not ours or has expired."""
        scope_b64, _, rest = token.partition(".")
        expires, _, signature = rest.partition(".")
        if not expires.isdigit() or int(expires) < self._clock():
            return None
        try:
            scope = base64.urlsafe_b64decode(scope_b64 + "=" * (-len(scope_b64) % 4)).decode()
        except (ValueError, UnicodeDecodeError):
            return None
        return scope if _same(signature, self._sign("token", scope, expires)) else None

    def reference(self, scope: str, blob: BlobRef) -> dict[str, Any]:
        """The upload's answer: the part's JSON and its `ref` for `scope`."""
        item = part_to_json(media_part(blob))
        return item | {"ref": self._sign("ref", scope, *_signed_fields(item))}

    def part(self, scope: str, item: object) -> MediaPart:
        """The part an `attachments` entry names, if its `ref` holds for `scope`."""
        if not isinstance(item, Mapping):
            raise UploadRefused(400, "each attachment must be an object, as the upload answered")
        ref = item.get("ref")
        try:
            part = part_from_json(item)
        except PartError as exc:
            raise UploadRefused(400, f"attachment: {exc}") from None
        expected = self._sign("ref", scope, *_signed_fields(item))
        if not isinstance(ref, str) or not _same(ref, expected):
            raise UploadRefused(
                403,
                "attachment `ref` does not match: send the object the upload answered, "
                "unchanged, in the conversation it was uploaded for",
            )
        if isinstance(part, TextPart):
            raise UploadRefused(400, "an attachment is a file the upload answered, not text")
        if isinstance(part, AudioPart) and part.transcript is not None:
            # what speech to text heard is the server's to say: heard again, never taken as sent
            return AudioPart(part.blob)
        return part

    def _sign(self, kind: str, scope: str, *fields: str) -> str:
        # a client's JSON may hold an unpaired surrogate: it signs (and fails to match) as any
        message = "\n".join((kind, scope, *fields)).encode("utf-8", "surrogatepass")
        digest = hmac.new(self._secret, message, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def rendered(parts: Sequence[Part], links: BlobLinks, base_url: str = "") -> list[dict[str, Any]]:
    """Media parts as frames and events carry them: their JSON and a signed, expiring `url`."""
    shown = []
    for part in parts:
        if isinstance(part, TextPart):
            continue
        link = links.link(part.blob.blob_id, part.blob.name)
        shown.append(part_to_json(part) | {"url": base_url.rstrip("/") + link})
    return shown


def _same(given: str, expected: str) -> bool:
    """In constant time; a client's string may hold any character (compare_digest takes str
    of ASCII only)."""
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode())


def _signed_fields(item: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(item.get(k, "")) for k in ("type", "blob_id", "mime_type", "size", "name"))


async def receive(request: web.Request, blobs: BlobStore, *, source: str) -> BlobRef:
    """The request's file (multipart field `file`, or the raw body with its Content-Type and a
    `?name=`), read at most `blobs.max_bytes` into the store; `UploadRefused` otherwise. A
    declared length over the cap is refused before a byte is read."""
    limit = blobs.max_bytes
    if request.content_length is not None and request.content_length > limit + 16_384:
        raise UploadRefused(413, _too_large(limit))
    if request.content_type.startswith("multipart/"):
        try:
            name, mime, data = await _file_field(request, limit)
        except (HttpProcessingError, ValueError, LookupError) as exc:
            raise UploadRefused(400, f"the multipart body cannot be read ({exc})") from None
    else:
        name = request.query.get("name")
        mime = request.content_type if request.content_type != OCTET_STREAM else None
        data = await _read(request.content.read, limit)
    if not data:
        raise UploadRefused(400, "the file is empty")
    name = (name or "").replace("/", "_").replace("\\", "_")[:MAX_NAME_CHARS] or None
    try:
        return await blobs.put(
            data, mime_type=_media_type(mime, name, data), name=name, source=source
        )
    except BlobTooLarge:
        raise UploadRefused(413, _too_large(limit)) from None


async def _file_field(request: web.Request, limit: int) -> tuple[str | None, str | None, bytes]:
    """The `file` field of a multipart body: its name, declared type and bytes (at most
    `limit`). Only a few fields may come before it: each is read to be skipped."""
    reader = await request.multipart()
    for _ in range(MAX_FIELDS):
        field = await reader.next()
        if field is None:
            break
        if isinstance(field, BodyPartReader) and field.name == "file":
            data = await _read(field.read_chunk, limit)
            return field.filename, field.headers.get("Content-Type"), data
    raise UploadRefused(400, "no `file` field among the multipart body's first fields")


async def _read(read: Callable[[int], Any], limit: int) -> bytes:
    buffer = bytearray()
    while chunk := await read(CHUNK):
        buffer += chunk
        if len(buffer) > limit:
            raise UploadRefused(413, _too_large(limit))
    return bytes(buffer)


def _media_type(declared: str | None, name: str | None, data: bytes) -> str:
    """The bytes' type where they tell (a `.png` that is a PDF is a PDF), else the declared
    one, else the name's; an SVG is a file, never an image (it runs scripts)."""
    found = sniffed(data)
    mime = (found or declared or "").split(";", 1)[0].strip().lower()
    if found is None and mime in SNIFFED_IMAGES:
        return OCTET_STREAM  # called an image, but its bytes are none we know: a file
    if (not mime or mime == OCTET_STREAM) and name:
        mime = mimetypes.guess_type(name, strict=False)[0] or ""
    if mime == "image/svg+xml":
        return OCTET_STREAM
    return mime or OCTET_STREAM


def _too_large(limit: int) -> str:
    return f"the file is over the limit of {limit} bytes (media.max_bytes)"
