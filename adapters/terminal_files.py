"""Files at the terminal: `/file PATH [text]` attaches a local file, and files the bot sends are
saved to a folder and named on screen (a terminal shows no images).

The terminal's user is the machine's user, so a path they type is theirs to read; it is read
at most the blob store's cap (a larger file is refused from its size before any byte is read).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from adapters.base import Attachment, ChannelError, FileTooLarge
from adapters.media import check_declared, file_name, keep, limit_for
from content.blobs import BlobStore
from content.parts import BlobRef, MediaPart

COMMAND = "/file"


def attachment(text: str) -> tuple[str, tuple[Attachment, ...]]:
    """`/file PATH [text]` → the text and the file; any other line → itself and no file."""
    word, _, rest = text.partition(" ")
    if word != COMMAND or not rest.strip():
        return text, ()
    path_text, _, said = rest.strip().partition(" ")
    path = Path(path_text).expanduser()
    try:
        size = path.stat().st_size
    except OSError:
        size = None  # refused with a reason when it is fetched
    return said.strip(), (Attachment("file", name=path.name, size=size, url=str(path)),)


async def fetch(attachment: Attachment, blobs: BlobStore) -> BlobRef:
    limit = limit_for(blobs)
    check_declared(attachment, limit)
    if attachment.url is None:
        raise ChannelError("a terminal file without a path")
    path = Path(attachment.url)
    try:
        data = await asyncio.to_thread(_read, path, limit)
    except OSError as exc:
        raise ChannelError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise FileTooLarge(attachment, limit)
    return await keep(blobs, data, attachment, source="terminal")


def _read(path: Path, limit: int) -> bytes:
    with path.open("rb") as file:
        return file.read(limit + 1)


async def save(folder: Path, part: MediaPart, blobs: BlobStore) -> Path:
    """The part written to `folder` under its name (a free one: nothing is overwritten)."""
    _, data = await blobs.get(part.blob.blob_id)
    return await asyncio.to_thread(_save, folder, file_name(part.blob, part.type), data)


def _save(folder: Path, name: str, data: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    stem, suffix = os.path.splitext(Path(name).name or "file")
    for number in range(1, 10_000):
        path = folder / (f"{stem}{suffix}" if number == 1 else f"{stem} ({number}){suffix}")
        try:
            with path.open("xb") as file:
                file.write(data)
        except FileExistsError:
            continue
        return path
    raise ChannelError(f"no free file name for {name!r} in {folder}")
