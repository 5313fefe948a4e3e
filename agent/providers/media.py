"""Media parts on the wire: what a model takes natively, and the rest as a line of text.

A user's image or PDF goes to the model as the vendor's own block (Anthropic `image` /
`document`, OpenAI `image_url` / `file`, both as base64: the vendor need not reach our server);
a text file (CSV, JSON, Markdown …) goes as its text, and so does a PDF's text for a model that
takes no documents. An image goes as the vendor takes it best (`ImageLimits` per vendor here:
scaled, converted, upright; content/images.py), and only the newest few of a history do
(`history_images`, image_plan.py). What a model does not take — audio, a Word file, an image on
a model configured without them (`llm.media`; an OpenAI-compatible server that is not OpenAI's
takes none by default), an image past the newest few, refused by the vendor or undecodable, a
blob retention removed — becomes a line of text (content/parts.py `describe`, with what
media_load.py noted: an image's size in pixels, why it is not shown), so the request is one the
model accepts and it still knows that something was sent.

The bytes are read from the blob store and made ready once per message, before the synchronous
encoders run (media_load.py), and kept on the message (`Message.derived`) only until its wire
form is cached.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from agent.types import Message
from content.images import ImageLimits
from content.parts import AudioPart, FilePart, ImagePart, Part, TextPart, describe

PDF = "application/pdf"
TEXT_TYPES = frozenset(
    {"application/json", "application/xml", "application/x-yaml", "application/yaml"}
)
NOT_IMAGES = frozenset({"image/svg+xml"})  # an SVG is a file (it may run scripts), never an image
MAX_TEXT_CHARS = 100_000  # a text file's text cut here: a CSV export can be any size
HISTORY_IMAGES = 4  # llm.media_history_images
Native = Literal["image", "pdf", "text", "pdf_text"]
MediaKind = Literal["image", "file"]

# Anthropic: a long edge of 1,568 px and ~1,600 tokens (w*h/750, so 1.2 MP) are what it scales
# anything larger down to; 5 MB of base64 per image is its cap (3.75 MB of bytes); it takes GIFs
ANTHROPIC_IMAGES = ImageLimits(long_edge=1568, max_pixels=1_200_000, max_bytes=3_750_000)
# OpenAI: "high" detail scales to 2,000 px long and then 768 px short, 20 MB per image, and it
# takes non-animated GIFs only; compatible servers (Ollama, vLLM ...) get the same, smaller cap
OPENAI_IMAGES = ImageLimits(long_edge=2000, short_edge=768, max_bytes=3_750_000, animated_gif=False)


@dataclass(frozen=True, slots=True)
class Media:
    """What one model takes natively: `image` (any raster image, prepared to `images`), `file`
    (PDF, text); and how many of a history's images go again as images (image_plan.py)."""

    accepts: frozenset[MediaKind] = frozenset({"image", "file"})
    images: ImageLimits = field(default=ANTHROPIC_IMAGES, compare=False)
    history_images: int = field(default=HISTORY_IMAGES, compare=False)

    @property
    def key(self) -> str:
        """Names the wire form a message takes under this support (two configs, two forms)."""
        return "+".join(sorted(self.accepts)) or "text"

    def native(self, part: Part) -> Native | None:
        """How the part goes to this model, or None: as its description. A PDF or a text file
        a model takes no files for goes as its text (a text-only model reads text)."""
        if isinstance(part, ImagePart):
            mime = part.blob.mime_type.lower().split(";")[0]
            return "image" if "image" in self.accepts and mime not in NOT_IMAGES else None
        if isinstance(part, FilePart):
            mime = part.blob.mime_type.lower().split(";")[0]
            if mime == PDF:
                return "pdf" if "file" in self.accepts else "pdf_text"
            if mime.startswith("text/") or mime in TEXT_TYPES:
                return "text"
        return None


ALL_MEDIA = Media()  # Anthropic's and OpenAI's own models
TEXT_ONLY = Media(frozenset())


def media_for(
    provider: str,
    base_url: str | None,
    configured: Sequence[str] | None,
    history_images: int = HISTORY_IMAGES,
) -> Media:
    """`llm.media` when set; else both kinds for Anthropic and OpenAI's own API, and text only
    for any other OpenAI-compatible server (most local models refuse an image part)."""
    images = ANTHROPIC_IMAGES if provider == "anthropic" else OPENAI_IMAGES
    if configured is not None:
        kinds = frozenset(k for k in configured if k in ("image", "file"))
    elif provider == "openai" and base_url and "api.openai.com" not in base_url:
        kinds = frozenset()
    else:
        kinds = frozenset({"image", "file"})
    return Media(kinds, images, history_images)  # type: ignore[arg-type]


def blob_key(part: ImagePart | FilePart | AudioPart) -> str:
    return "blob:" + part.blob.blob_id


def loaded(message: Message, part: ImagePart | FilePart | AudioPart) -> tuple[str, str] | None:
    """What media_load.py read for the part: (media type, base64) of an image or a PDF, or
    (media type, text) of a text file or a PDF's text; None: describe it."""
    value = message.derived.get(blob_key(part))
    return value if isinstance(value, tuple) else None


def as_text(how: Native, data: tuple[str, str]) -> bool:
    """What was loaded is text (a text file, a PDF's text: one refused as a document, too)."""
    return how in ("text", "pdf_text") or (how == "pdf" and data[0] != PDF)


def note_key(part: ImagePart | FilePart | AudioPart) -> str:
    return "note:" + part.blob.blob_id


def forget(message: Message) -> None:
    """Drop the bytes read for the message once its wire form is cached: they live there now."""
    for key in [k for k in message.derived if k.startswith(("blob:", "note:"))]:
        del message.derived[key]


def file_text(part: FilePart, text: str) -> str:
    name = part.blob.name or "file"
    return f"[The file {name!r} ({part.blob.mime_type}) reads:]\n{text}"


def descriptions(message: Message, parts: Sequence[Part]) -> str:
    """The parts a block could not carry, as text, one a line: what media_load.py noted of
    one (an image's size, why it is not shown), else its plain description."""
    return "\n".join(
        message.derived.get(note_key(p)) or describe(p)
        for p in parts
        if not isinstance(p, TextPart)
    )
