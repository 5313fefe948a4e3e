"""Content parts: text, image, file (a document) and audio, the one vocabulary of every carrier.

Non-text parts never carry bytes: they point at a blob (`BlobRef`: id, media type, size, name and
where it came from) kept by a `BlobStore` (content/blobs.py). A message, a tool result, a stored
history row or a web socket frame holds parts; the bytes are read from the store only by whoever
must send them (a provider encoding an image, a channel uploading a file).

The JSON form (stored history, web socket and API `attachments`) is one flat object a part:
`{"type": "image", "blob_id": ..., "mime_type": ..., "size": ..., "name": ..., "source": ...}`,
`{"type": "text", "text": ...}`; `audio` may add `transcript`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

PartType = Literal["text", "image", "file", "audio"]
MEDIA_TYPES: frozenset[str] = frozenset({"image", "file", "audio"})


class PartError(ValueError):
    """A part's JSON form is not one this vocabulary knows (names the field and the fix)."""


@dataclass(frozen=True, slots=True)
class BlobRef:
    """A blob a part points at. `source` says where it came from, e.g. `telegram`, `upload`,
    `tool:create_payment`: for the audit trail, never for access decisions."""

    blob_id: str
    mime_type: str
    size: int
    name: str | None = None
    source: str | None = None


@dataclass(frozen=True, slots=True)
class TextPart:
    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ImagePart:
    blob: BlobRef
    type: Literal["image"] = "image"


@dataclass(frozen=True, slots=True)
class FilePart:
    """A document (a PDF, a spreadsheet, any file that is neither image nor audio)."""

    blob: BlobRef
    type: Literal["file"] = "file"


@dataclass(frozen=True, slots=True)
class AudioPart:
    """A voice note or an audio file; `transcript` once speech-to-text has read it."""

    blob: BlobRef
    transcript: str | None = None
    type: Literal["audio"] = "audio"


MediaPart: TypeAlias = ImagePart | FilePart | AudioPart
Part: TypeAlias = TextPart | ImagePart | FilePart | AudioPart


def media_part(blob: BlobRef) -> MediaPart:
    """The part a blob makes by its media type: `image/*` an image, `audio/*` audio, else a file."""
    major = blob.mime_type.split("/", 1)[0].lower()
    if major == "image":
        return ImagePart(blob)
    if major == "audio":
        return AudioPart(blob)
    return FilePart(blob)


def part_to_json(part: Part) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    blob = part.blob
    out: dict[str, Any] = {
        "type": part.type,
        "blob_id": blob.blob_id,
        "mime_type": blob.mime_type,
        "size": blob.size,
    }
    if blob.name is not None:
        out["name"] = blob.name
    if blob.source is not None:
        out["source"] = blob.source
    if isinstance(part, AudioPart) and part.transcript is not None:
        out["transcript"] = part.transcript
    return out


def part_from_json(value: Mapping[str, Any]) -> Part:
    """The part of one JSON object; `PartError` naming what is wrong (a client's frame may hold
    anything where a part should be)."""
    if not isinstance(value, Mapping):
        raise PartError("a part must be a JSON object with a `type`")
    kind = value.get("type")
    if kind == "text":
        text = value.get("text")
        if not isinstance(text, str):
            raise PartError("a text part needs `text` (a string)")
        return TextPart(text)
    if not isinstance(kind, str) or kind not in MEDIA_TYPES:
        raise PartError(f"unknown part type {kind!r}; known: text, image, file, audio")
    blob_id, mime_type, size = value.get("blob_id"), value.get("mime_type"), value.get("size")
    if not isinstance(blob_id, str) or not blob_id:
        raise PartError(f"an {kind} part needs `blob_id` (a string)")
    if not isinstance(mime_type, str) or "/" not in mime_type:
        raise PartError(f"an {kind} part needs `mime_type` (type/subtype)")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise PartError(f"an {kind} part needs `size` (bytes, an integer >= 0)")
    name, source = value.get("name"), value.get("source")
    blob = BlobRef(
        blob_id,
        mime_type,
        size,
        name if isinstance(name, str) else None,
        source if isinstance(source, str) else None,
    )
    if kind == "image":
        return ImagePart(blob)
    if kind == "file":
        return FilePart(blob)
    transcript = value.get("transcript")
    return AudioPart(blob, transcript if isinstance(transcript, str) else None)


def parts_to_json(parts: Iterable[Part]) -> str | None:
    """The JSON text of a list of parts, None for none (a text-only message stores nothing)."""
    items = [part_to_json(p) for p in parts]
    return json.dumps(items, ensure_ascii=False, separators=(",", ":")) if items else None


def parts_from_json(text: str | None) -> tuple[Part, ...]:
    if not text:
        return ()
    items = json.loads(text)
    if not isinstance(items, list):
        raise PartError("parts must be a JSON list")
    return tuple(part_from_json(item) for item in items)


def describe(part: Part, detail: str | None = None) -> str:
    """How a model that cannot see the part reads it (a text-only model, a transcript line);
    `detail` goes before the size (an image's `4032×3024`)."""
    if isinstance(part, TextPart):
        return part.text
    blob = part.blob
    name = f" {blob.name!r}" if blob.name else ""
    label = {"image": "image", "file": "file", "audio": "audio"}[part.type]
    more = f"{detail}, " if detail else ""
    text = f"[{label}{name}: {blob.mime_type}, {more}{size_text(blob.size)}]"
    if isinstance(part, AudioPart) and part.transcript:
        # the model reads a voice note's words as the user's own, knowing they were spoken
        text += f" (spoken; transcribed by speech-to-text:) {part.transcript}"
    return text


def text_of(parts: Sequence[Part]) -> str:
    """The text parts joined, media described in place: a text-only rendering of `parts`."""
    return "\n".join(describe(p) for p in parts)


def size_text(size: int) -> str:
    """A size as people read it: decimal units, as the widget and `media.max_bytes` count; a
    whole number of MiB (Telegram's 20 MB `getFile` cap is 20 × 2²⁰) in its own units, so a
    limit reads as the platform states it, not as "21.0 MB"."""
    mib, rest = divmod(size, 2**20)
    if size and not rest:
        return f"{mib} MB"
    if size < 1000:
        return f"{size} B"
    return f"{size / 1_000_000:.1f} MB" if size >= 999_500 else f"{size / 1000:.0f} KB"
