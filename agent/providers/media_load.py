"""Reading a request's media before the synchronous encoders run: images prepared, PDFs read.

For each message whose wire form is not kept yet (under its plan key, image_plan.py), the parts
the model takes are read from the blob store and made ready (`Message.derived`, dropped once the
form is kept): an image scaled and converted for the vendor (content/images.py, in a thread),
a PDF as base64 or, for a model that takes no documents, its text (content/pdf_text.py), a
text file as its text. What is described instead gets its line: a text-only model reads an
image's type, size in pixels and bytes; an image past the last few reads that it is not sent
again; one the vendor refused, or that cannot be decoded, says so.

`ImageShelf` keeps what is worth keeping across requests, in this process: prepared images
(by blob and target, up to a byte budget: a history rebuilt after the store's cache let it go
does not scale its photos again), sizes, and the images not to send. A refusal is also kept in
the blob store, as a mark (`refusal_mark`: a small blob whose bytes name the refused one, so
its id is known without an index), so another process, or this one after a restart, does not
send the image again either.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections import OrderedDict
from collections.abc import Sequence

from agent.providers.image_plan import Plan, candidate
from agent.providers.media import (
    MAX_TEXT_CHARS,
    NOT_IMAGES,
    PDF,
    Media,
    blob_key,
    note_key,
)
from agent.types import BlobReader, Message
from content.blobs import BlobError, BlobNotFound, blob_id_of
from content.images import ImageInfo, ImageUnreadable, Prepared, inspect, prepare
from content.parts import FilePart, ImagePart, TextPart, describe
from content.pdf_text import pdf_text

log = logging.getLogger(__name__)

PREPARED_BYTES = 64_000_000  # prepared images kept in this process (a few hundred photos)
REFUSAL_MIME = "application/x-refused-image"


def refusal_mark(blob_id: str) -> bytes:
    """The bytes of the blob that marks `blob_id` as refused by a model: its id is their hash."""
    return b"refused-by-model:" + blob_id.encode()


class _Bounded(OrderedDict[str, object]):
    """A small LRU map (ids to sizes, marks)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def keep(self, key: str, value: object) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)


class ImageShelf:
    """What this process knows of images across requests (module docstring)."""

    def __init__(self, budget: int = PREPARED_BYTES) -> None:
        self.budget = budget
        self._prepared: OrderedDict[tuple[str, str], Prepared] = OrderedDict()
        self._held = 0
        self.sizes = _Bounded(16_384)  # blob id -> ImageInfo
        self.dropped = _Bounded(16_384)  # blob id -> why it is not sent ("refused", "unreadable")
        self.accepted = _Bounded(16_384)  # blob ids a model took: not suspects of a refusal
        self.checked = _Bounded(16_384)  # blob ids whose refusal mark was looked for

    def clear(self) -> None:
        """Forget everything (a test's fresh start; the store's marks stay)."""
        self._prepared.clear()
        self._held = 0
        for known in (self.sizes, self.dropped, self.accepted, self.checked):
            known.clear()

    def prepared(self, blob_id: str, target: str) -> Prepared | None:
        found = self._prepared.get((blob_id, target))
        if found is not None:
            self._prepared.move_to_end((blob_id, target))
        return found

    def keep(self, blob_id: str, target: str, image: Prepared) -> None:
        self._prepared[(blob_id, target)] = image
        self._held += len(image.data)
        while self._held > self.budget and self._prepared:
            _, old = self._prepared.popitem(last=False)
            self._held -= len(old.data)

    async def refuse(self, blob_ids: Sequence[str], reader: BlobReader | None) -> None:
        """Never send these again (a vendor refused them): here, and as a mark in the store."""
        for blob_id in blob_ids:
            self.dropped.keep(blob_id, "refused")
            if reader is None:
                continue
            try:
                await reader.put(refusal_mark(blob_id), mime_type=REFUSAL_MIME, source="model")
            except BlobError as exc:  # kept in this process only; the next restart may retry it
                log.warning("could not keep the refusal of blob %s: %s", blob_id, exc)


SHELF = ImageShelf()


async def load(
    messages: Sequence[Message],
    media: Media,
    reader: BlobReader | None,
    plan: Plan,
    base: str,
    shelf: ImageShelf = SHELF,
) -> bool:
    """Read what the messages from `plan.start` on need (their form under `base` not kept).
    False: an image to send turned out refused or unreadable: plan again, then load again."""
    settled = True
    for index in range(plan.start, len(messages)):
        message = messages[index]
        if not message.parts or plan.key(base, index, message) in message.derived:
            continue
        for number, part in enumerate(message.parts):
            if isinstance(part, TextPart):
                continue
            if isinstance(part, ImagePart):
                live = (index, number) in plan.live
                settled &= await _image(message, part, media, reader, live, shelf)
                continue
            how = media.native(part) if isinstance(part, FilePart) else None
            if not isinstance(part, FilePart) or not how or blob_key(part) in message.derived:
                continue
            refused = how == "pdf" and (index, number) not in plan.documents
            if refused:
                how = "pdf_text"  # the model refused it as a document: its text instead
            elif how == "pdf" and await _refused(part.blob.blob_id, reader, shelf):
                settled = False
                continue
            await _file(message, part, how, reader, refused=refused)
    return settled


async def _image(
    message: Message,
    part: ImagePart,
    media: Media,
    reader: BlobReader | None,
    live: bool,
    shelf: ImageShelf,
) -> bool:
    blob_id = part.blob.blob_id
    if live:
        if await _refused(blob_id, reader, shelf):
            return False
        found = await _prepared(part, media, reader, shelf)
        if found is None:
            return blob_id not in shelf.dropped  # unreadable: plan without it
        message.derived[blob_key(part)] = (found.mime_type, base64.b64encode(found.data).decode())
        return True
    if not candidate(message, part, media):  # the model takes no images: their size, in words
        known = shelf.sizes.get(blob_id)
        info = known if isinstance(known, ImageInfo) else None
        svg = part.blob.mime_type.lower().split(";")[0] in NOT_IMAGES
        if info is None and reader is not None and not svg:
            info = await _inspected(part, reader, shelf)
        message.derived[note_key(part)] = image_line(part, info, None)
        return True
    why = shelf.dropped.get(blob_id)
    size = shelf.sizes.get(blob_id)
    message.derived[note_key(part)] = image_line(
        part, size if isinstance(size, ImageInfo) else None, str(why) if why else "earlier"
    )
    return True


def image_line(part: ImagePart, info: ImageInfo | None, why: str | None) -> str:
    """`[image 'photo.jpg': image/jpeg, 4032×3024, 2.1 MB]`, and why it is not shown."""
    line = describe(part, f"{info.width}×{info.height}" if info is not None else None)
    if why == "earlier":
        line += " (an earlier image: only the newest are sent again)"
    elif why == "refused":
        line += " (the AI model refused this image, so it is left out)"
    elif why:
        line += " (it could not be read as an image)"
    return line


async def _prepared(
    part: ImagePart, media: Media, reader: BlobReader | None, shelf: ImageShelf
) -> Prepared | None:
    blob_id, target = part.blob.blob_id, media.images.key
    found = shelf.prepared(blob_id, target)
    if found is not None or reader is None:
        return found
    try:
        _, data = await reader.get(blob_id)
    except Exception as exc:  # gone (retention), or the store failed: described instead
        log.warning("blob %s not sent to the model: %s", blob_id, exc)
        return None
    try:
        found = await asyncio.to_thread(prepare, data, media.images)
    except ImageUnreadable as exc:
        log.info("image %s is not sent to the model: %s", blob_id, exc)
        shelf.dropped.keep(blob_id, "unreadable")
        return None
    shelf.sizes.keep(blob_id, ImageInfo(found.mime_type, *found.original))
    shelf.keep(blob_id, target, found)
    return found


async def _inspected(part: ImagePart, reader: BlobReader, shelf: ImageShelf) -> ImageInfo | None:
    try:
        _, data = await reader.get(part.blob.blob_id)
        info = await asyncio.to_thread(inspect, data)
    except Exception as exc:  # gone, the store failed, or no image: described without a size
        log.info("image %s: no size to describe: %s", part.blob.blob_id, exc)
        return None
    shelf.sizes.keep(part.blob.blob_id, info)
    return info


async def _refused(blob_id: str, reader: BlobReader | None, shelf: ImageShelf) -> bool:
    """A model refused the blob before (in another process, or before a restart): its mark
    is looked for once per process."""
    if blob_id in shelf.checked or reader is None:
        return False
    shelf.checked.keep(blob_id, True)
    if await _marked(reader, blob_id):
        shelf.dropped.keep(blob_id, "refused")
        return True
    return False


async def _marked(reader: BlobReader, blob_id: str) -> bool:
    try:
        await reader.get(blob_id_of(refusal_mark(blob_id)))
    except BlobNotFound:
        return False
    except Exception as exc:  # the store failed: send it; a refusal is caught again anyway
        log.warning("could not look for the refusal of blob %s: %s", blob_id, exc)
        return False
    return True


async def _file(
    message: Message, part: FilePart, how: str, reader: BlobReader | None, *, refused: bool
) -> None:
    if reader is None:
        return
    try:
        _, data = await reader.get(part.blob.blob_id)
    except Exception as exc:  # gone (retention), or the store failed: described instead
        log.warning("blob %s not sent to the model: %s", part.blob.blob_id, exc)
        return
    if how == "pdf":
        message.derived[blob_key(part)] = (PDF, base64.b64encode(data).decode())
    elif how == "pdf_text":
        try:
            pages, text = await asyncio.to_thread(pdf_text, data, MAX_TEXT_CHARS)
        except ValueError as exc:
            message.derived[note_key(part)] = f"{describe(part)} (its text could not be read)"
            log.info("PDF %s: no text: %s", part.blob.blob_id, exc)
            return
        why = ": the AI model refused it as a document" if refused else ""
        count = f"{pages} page" + ("s" if pages != 1 else "")
        message.derived[blob_key(part)] = ("text/plain", f"({count}, as text{why})\n{text}")
    else:
        text = data.decode("utf-8", errors="replace")
        if len(text) > MAX_TEXT_CHARS:
            text = text[:MAX_TEXT_CHARS] + "\n…[cut]"
        message.derived[blob_key(part)] = (part.blob.mime_type, text)
