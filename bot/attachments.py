"""Before a turn: the files its messages announced, fetched into the blob store by their channel.

A file the channel refuses (over the size cap, checked before downloading) or fails to fetch is
left out, and its sender is told why in a reply of its own; the rest of the message is answered.
A channel that cannot fetch, or a gateway without a blob store, leaves the attachments as the
platform announced them (the turn reads their labels).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

from adapters.base import Channel, ChannelError, FetchesFiles, FileTooLarge, InboundMessage
from content.blobs import BlobError, BlobStore
from content.parts import media_part

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Refusal:
    message: InboundMessage  # the message whose file was left out, to reply to
    reply: str


@dataclass(frozen=True, slots=True)
class Fetched:
    batch: list[InboundMessage]  # each with the parts of its fetched files, in order
    refusals: tuple[Refusal, ...] = ()


async def fetch_files(
    channel: Channel, blobs: BlobStore | None, batch: Sequence[InboundMessage]
) -> Fetched:
    if blobs is None or not isinstance(channel, FetchesFiles):
        return Fetched(list(batch))
    fetched, refusals = [], []
    for message in batch:
        parts = list(message.parts)
        for attachment in message.attachments:
            try:
                parts.append(media_part(await channel.fetch(message, attachment, blobs)))
            except FileTooLarge as exc:
                log.info("%s in %s refused: %s", attachment.kind, message.chat.key, exc)
                refusals.append(Refusal(message, exc.reply))
            except (ChannelError, BlobError) as exc:
                log.warning("%s in %s not fetched: %s", attachment.kind, message.chat.key, exc)
                name = f" “{attachment.name}”" if attachment.name else ""
                reply = f"I could not read the {attachment.kind}{name}: the download failed."
                refusals.append(Refusal(message, reply))
        fetched.append(replace(message, parts=tuple(parts)) if message.attachments else message)
    return Fetched(fetched, tuple(refusals))
