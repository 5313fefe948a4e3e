"""Media parts on the wire: what a model takes natively, and the rest as a line of text.

A user's image or PDF goes to the model as the vendor's own block (Anthropic `image` /
`document`, OpenAI `image_url` / `file`, both as base64: the vendor need not reach our server);
a text file (CSV, JSON, Markdown …) goes as its text. What a model does not take — audio, a
Word file, any media on a model configured text-only (`llm.media: []`, the default for an
OpenAI-compatible server that is not OpenAI's), a blob retention removed — becomes the part's
description (content/parts.py `describe`), so the request is one the model accepts and it still
knows that something was sent.

The bytes are read from the blob store once per message, before the synchronous encoders run
(`load`), and kept on the message (`Message.derived`) only until its wire form is cached.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from agent.types import BlobReader, Message
from content.parts import AudioPart, FilePart, ImagePart, Part, TextPart, describe

log = logging.getLogger(__name__)

IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})  # both vendors
PDF = "application/pdf"
TEXT_TYPES = frozenset(
    {"application/json", "application/xml", "application/x-yaml", "application/yaml"}
)
MAX_TEXT_CHARS = 100_000  # a text file's text cut here: a CSV export can be any size
Native = Literal["image", "pdf", "text"]
MediaKind = Literal["image", "file"]


@dataclass(frozen=True, slots=True)
class Media:
    """What one model takes natively: `image` (JPEG, PNG, GIF, WebP), `file` (PDF, text)."""

    accepts: frozenset[MediaKind] = frozenset({"image", "file"})

    @property
    def key(self) -> str:
        """Names the wire form a message takes under this support (two configs, two forms)."""
        return "+".join(sorted(self.accepts)) or "text"

    def native(self, part: Part) -> Native | None:
        """How the part goes to this model, or None: as its description."""
        if isinstance(part, ImagePart):
            mime = part.blob.mime_type.lower()
            return "image" if "image" in self.accepts and mime in IMAGE_TYPES else None
        if isinstance(part, FilePart) and "file" in self.accepts:
            mime = part.blob.mime_type.lower().split(";")[0]
            if mime == PDF:
                return "pdf"
            if mime.startswith("text/") or mime in TEXT_TYPES:
                return "text"
        return None


ALL_MEDIA = Media()  # Anthropic's and OpenAI's own models
TEXT_ONLY = Media(frozenset())


def media_for(provider: str, base_url: str | None, configured: Sequence[str] | None) -> Media:
    """`llm.media` when set; else both kinds for Anthropic and OpenAI's own API, and text only
    for any other OpenAI-compatible server (most local models refuse an image part)."""
    if configured is not None:
        return Media(frozenset(k for k in configured if k in ("image", "file")))  # type: ignore[misc]
    if provider == "openai" and base_url and "api.openai.com" not in base_url:
        return TEXT_ONLY
    return ALL_MEDIA


def blob_key(part: ImagePart | FilePart | AudioPart) -> str:
    return "blob:" + part.blob.blob_id


async def load(
    messages: Sequence[Message], media: Media, reader: BlobReader | None, encoded: str
) -> None:
    """Read the bytes of every part these messages carry natively and have not encoded yet
    (`encoded`: the key their wire form is cached under)."""
    for message in messages:
        if not message.parts or encoded in message.derived:
            continue
        for part in message.parts:
            if isinstance(part, TextPart) or media.native(part) is None:
                continue
            key = blob_key(part)
            if key in message.derived:
                continue
            message.derived[key] = await _read(part, media.native(part), reader)


async def _read(
    part: ImagePart | FilePart | AudioPart, how: Native | None, reader: BlobReader | None
) -> str | None:
    if reader is None:
        return None
    try:
        _, data = await reader.get(part.blob.blob_id)
    except Exception as exc:  # gone (retention), or the store failed: described instead
        log.warning("blob %s not sent to the model: %s", part.blob.blob_id, exc)
        return None
    if how == "text":
        text = data.decode("utf-8", errors="replace")
        return text if len(text) <= MAX_TEXT_CHARS else text[:MAX_TEXT_CHARS] + "\n…[cut]"
    return base64.b64encode(data).decode("ascii")


def loaded(message: Message, part: ImagePart | FilePart | AudioPart) -> str | None:
    """What `load` read for the part (base64, or a text file's text), or None: describe it."""
    value = message.derived.get(blob_key(part))
    return value if isinstance(value, str) else None


def forget(message: Message) -> None:
    """Drop the bytes read for the message once its wire form is cached: they live there now."""
    for key in [k for k in message.derived if k.startswith("blob:")]:
        del message.derived[key]


def file_text(part: FilePart, text: str) -> str:
    name = part.blob.name or "file"
    return f"[The file {name!r} ({part.blob.mime_type}) reads:]\n{text}"


def descriptions(parts: Sequence[Part]) -> str:
    """The parts a block could not carry, as text, one a line."""
    return "\n".join(describe(p) for p in parts if not isinstance(p, TextPart))
