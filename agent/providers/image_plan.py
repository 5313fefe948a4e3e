"""Which images of a request go to the model as images: the newest few, none it refused.

An image costs a model call ~1,600 tokens and megabytes of body every time the history is sent
again, so only the last `llm.media_history_images` (Media.history_images) images the model
takes go as images, and every image of the current turn (at most MAX_IMAGES in all); older
ones go as their one-line description, and so do images a vendor refused or that cannot be
decoded (media_load.py marks them), so one bad file never breaks the conversation. A PDF goes
as a document unless a vendor refused it as one: then as its text (`Plan.documents`).

A request's wire form is built from pieces kept per message (wire.py) and continues from what
the conversation's last request made of its history (`Prefix`). Both depend on this choice: a
message's piece is kept under a key naming which of its images are live (`Plan.key`), and a
prefix keeps the images it holds (`Seen`), so that when a newer image pushes one out, or one is
refused, the prefix is no longer used and the messages are walked again (their pieces are
still kept: only the changed message is encoded anew). Everything kept is tuples of strings and
numbers, which the cyclic collector stops walking (wire.py).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from agent.providers.media import PDF, Media
from agent.providers.wire import Prefix, resume
from agent.types import Message
from content.parts import FilePart, ImagePart

Slot = tuple[int, int, str]  # (message index, part index, blob id) of an image the model takes
# a prefix's images (newest KEEP), the live ones, and the PDFs it sent as documents
Seen = tuple[tuple[Slot, ...], tuple[Slot, ...], tuple[Slot, ...]]
KEEP = 64
# the current turn's images all go (a user who sends six photos means all six), up to this many:
# past 20 in a request Anthropic takes smaller ones only, and each is ~1,600 tokens
MAX_IMAGES = 20


@dataclass(frozen=True, slots=True)
class Plan:
    """One request's choice: `live` images go as images; messages before `start` are the kept
    prefix's (`prefix`, None: walk them all); `seen` is what the next request's prefix keeps."""

    start: int
    prefix: Prefix[Any] | None
    live: frozenset[tuple[int, int]]
    seen: Seen
    documents: frozenset[tuple[int, int]] = frozenset()  # PDFs that go as documents

    def key(self, base: str, index: int, message: Message) -> str:
        """The key a message's piece is kept under: `base` and which of its images are live
        (1, else 0) and PDFs go as documents (d, else t: their text)."""
        marks = "".join(
            ("1" if (index, n) in self.live else "0")
            if isinstance(part, ImagePart)
            else ("d" if (index, n) in self.documents else "t")
            for n, part in enumerate(message.parts)
            if isinstance(part, ImagePart) or _pdf(part)
        )
        return f"{base}:{marks}" if marks else base

    def blob_ids(self, messages: Sequence[Message], documents: bool = False) -> list[str]:
        """The blobs of the live images (or of the PDFs sent as documents)."""
        return [
            messages[index].parts[number].blob.blob_id  # type: ignore[union-attr]
            for index, number in sorted(self.documents if documents else self.live)
        ]


def _pdf(part: object) -> bool:
    return isinstance(part, FilePart) and part.blob.mime_type.lower().split(";")[0] == PDF


def candidate(message: Message, part: object, media: Media) -> bool:
    """An image the model may be sent: not in the bot's own messages (no API takes them)."""
    return (
        isinstance(part, ImagePart)
        and message.role != "assistant"
        and media.native(part) == "image"
    )


def _turn_start(messages: Sequence[Message]) -> int:
    """Where the current turn starts: the newest user message (tool results are role "tool")."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user":
            return index
    return len(messages)


def plan_images(
    messages: Sequence[Message], media: Media, prefix_key: str, dropped: Collection[str]
) -> Plan:
    """The plan for this history; `dropped`: blobs not to send (refused, undecodable)."""
    prefix = resume(messages, prefix_key)
    if prefix is not None:
        made, seen = prefix.made
        plan = _planned(messages, media, dropped, prefix, made, seen)
        if plan is not None:
            return plan
    plan = _planned(messages, media, dropped, None, None, ((), (), ()))
    assert plan is not None  # without a prefix there is nothing to disagree with
    return plan


def _planned(
    messages: Sequence[Message],
    media: Media,
    dropped: Collection[str],
    prefix: Prefix[Any] | None,
    made: Any,
    seen: Seen,
) -> Plan | None:
    start = prefix.count if prefix is not None else 0
    kept, was_live, was_sent = seen
    images = [slot for slot in kept if slot[2] not in dropped]
    documents = list(was_sent)
    if len(images) != len(kept) or any(slot[2] in dropped for slot in documents):
        return None  # one of the prefix's images or PDFs was dropped since: its piece changes
    for index in range(start, len(messages)):
        message = messages[index]
        for number, part in enumerate(message.parts):
            if candidate(message, part, media):
                assert isinstance(part, ImagePart)
                if part.blob.blob_id not in dropped:
                    images.append((index, number, part.blob.blob_id))
            elif _pdf(part) and message.role != "assistant" and media.native(part) == "pdf":
                assert isinstance(part, FilePart)
                if part.blob.blob_id not in dropped:
                    documents.append((index, number, part.blob.blob_id))
    newest = set(images[-media.history_images :]) if media.history_images > 0 else set()
    turn = _turn_start(messages)
    live = tuple(s for s in images if s in newest or s[0] >= turn)[-MAX_IMAGES:]
    if tuple(slot for slot in live if slot[0] < start) != was_live:
        return None  # a newer image pushed one of the prefix's out
    kept_prefix = None if prefix is None else Prefix(prefix.first, prefix.count, made)
    return Plan(
        start,
        kept_prefix,
        frozenset((slot[0], slot[1]) for slot in live),
        (tuple(images[-KEEP:]), live, tuple(documents)),
        frozenset((slot[0], slot[1]) for slot in documents),
    )
