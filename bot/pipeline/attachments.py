"""Before a turn: the files its messages announced, fetched into the blob store by their channel.

A fetched file becomes a part of its message. A file the channel refuses (over the size cap,
checked before downloading) or fails to fetch stays an attachment (the model reads its label) and
its sender is told why in a reply of its own; the rest of the message is answered. After the
turn, `send_parts` sends the answer's media where the channel sends them one by one.
A channel that cannot fetch, or a gateway without a blob store, leaves the attachments as the
platform announced them (the turn reads their labels).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from adapters.base import (
    Attachment,
    Channel,
    ChannelError,
    ChatRef,
    FetchesFiles,
    FileTooLarge,
    InboundMessage,
    OutboundContent,
    RateLimited,
    SendsParts,
)
from content.blobs import BlobError, BlobStore
from content.parts import AudioPart, BlobRef, MediaPart, Part, TextPart, media_part, size_text
from content.texts import DEFAULT_LANGUAGE, has, t

log = logging.getLogger(__name__)

PART_WAIT_S = 30.0  # the most a file waits out rate limits before it is said to be unsent


@dataclass(frozen=True, slots=True)
class Refusal:
    message: InboundMessage  # the message whose file was left out, to reply to
    reply: str


@dataclass(frozen=True, slots=True)
class Fetched:
    batch: list[InboundMessage]  # each with the parts of its fetched files, in order
    refusals: tuple[Refusal, ...] = ()


def to_fetch(channel: Channel, blobs: BlobStore | None, batch: Sequence[InboundMessage]) -> bool:
    """Whether `fetch_files` would download anything: the batch announced files, the gateway
    keeps files and the channel fetches them. A text-only batch costs nothing more (a runtime
    Protocol check is not free)."""
    if blobs is None or not any(m.attachments for m in batch):
        return False
    return isinstance(channel, FetchesFiles)


async def fetch_files(
    channel: Channel,
    blobs: BlobStore | None,
    batch: Sequence[InboundMessage],
    language: str = DEFAULT_LANGUAGE,
) -> Fetched:
    """`language`: the conversation's, for the replies that say why a file was left out."""
    if not to_fetch(channel, blobs, batch):
        return Fetched(list(batch))
    assert isinstance(channel, FetchesFiles) and blobs is not None  # what to_fetch checked
    fetched, refusals = [], []
    for message in batch:
        parts, left = list(message.parts), []
        for attachment in message.attachments:
            try:
                parts.append(_part(attachment, await channel.fetch(message, attachment, blobs)))
                continue
            except FileTooLarge as exc:
                log.info("%s in %s refused: %s", attachment.kind, message.chat.key, exc)
                size = f" ({size_text(exc.size)})" if exc.size is not None else ""
                known = exc.attachment  # as the channel learnt it (a Slack Connect file's name)
                what = file_label(language, known.kind, known.name)
                limit = size_text(exc.limit)
                reply = t(language, "file.too_large", what=what, size=size, limit=limit)
                refusals.append(Refusal(message, reply))
            except (ChannelError, BlobError) as exc:
                log.warning("%s in %s not fetched: %s", attachment.kind, message.chat.key, exc)
                what = file_label(language, attachment.kind, attachment.name)
                reply = t(language, "file.not_fetched", what=what)
                refusals.append(Refusal(message, reply))
            left.append(attachment)  # named to the model as a file it could not read
        if message.attachments:
            message = replace(message, parts=tuple(parts), attachments=tuple(left))
        fetched.append(message)
    return Fetched(fetched, tuple(refusals))


def _part(attachment: Attachment, blob: BlobRef) -> MediaPart:
    """The part a fetched file makes: by its media type, but a voice kind (a Telegram video
    note, a Slack audio clip) is audio whatever its type, to be transcribed."""
    return AudioPart(blob) if attachment.spoken else media_part(blob)


async def tell_refusals(channel: Channel, refusals: Sequence[Refusal]) -> None:
    """Each refused file's sender told why, in a reply of its own (a failed reply is logged)."""
    for refusal in refusals:
        message = refusal.message
        try:
            content = OutboundContent(refusal.reply)
            await channel.send(message.chat, content, reply_to=message.message_id, final=True)
        except ChannelError as exc:
            log.warning("refusal not sent in %s: %s", message.chat.key, exc)


async def send_parts(
    channel: Channel,
    chat: ChatRef,
    parts: Sequence[Part],
    blobs: BlobStore | None,
    *,
    reply_to: str | None = None,
    language: str = DEFAULT_LANGUAGE,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> list[str]:
    """An answer's media parts, sent after its final text where the channel sends them one by
    one (`SendsParts`, and `ChannelLimits.parts_inline` false); what could not be sent, as lines
    to tell the user. A channel of neither kind has them on its final content only. Each goes
    through the channel's rate budget as a message does: a rate limit is waited out (a while),
    not reported as a failure."""
    media = [part for part in parts if not isinstance(part, TextPart)]
    inline = channel.limits_for(chat).parts_inline
    if not media or inline or blobs is None or not isinstance(channel, SendsParts):
        return []
    failed = []
    for part in media:
        try:
            await _send_part(channel, chat, part, blobs, reply_to, sleep)
        except (ChannelError, BlobError) as exc:
            log.warning("%s not sent in %s: %s", part.type, chat.key, exc)
            what = file_label(language, part.type, part.blob.name or part.type)
            failed.append(t(language, "file.not_sent", what=what))
    return failed


async def send_parts_or_say(
    channel: Channel,
    chat: ChatRef,
    parts: Sequence[Part],
    blobs: BlobStore | None,
    *,
    reply_to: str | None,
    language: str,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """`send_parts`, and a part that could not be sent said in a last message of its own."""
    failed = await send_parts(
        channel, chat, parts, blobs, reply_to=reply_to, language=language, sleep=sleep
    )
    if not failed:
        return
    try:
        await channel.send(chat, OutboundContent("\n".join(failed)), reply_to=reply_to, final=True)
    except ChannelError as exc:
        log.warning("files not sent in %s, nor said: %s", chat.key, exc)


async def _send_part(
    channel: SendsParts,
    chat: ChatRef,
    part: MediaPart,
    blobs: BlobStore,
    reply_to: str | None,
    sleep: Callable[[float], Awaitable[None]],
) -> None:
    """A `RateLimited` send was not made (the budget refused it, or the platform's 429), so it
    is tried again after the wait, while the waits stay under PART_WAIT_S in all."""
    waited = 0.0
    while True:
        try:
            await channel.send_part(chat, part, blobs, reply_to=reply_to)
            return
        except RateLimited as exc:
            waited += exc.retry_after
            if waited > PART_WAIT_S:
                raise
            log.info(
                "%s in %s waits %.1f s for the rate limit", part.type, chat.key, exc.retry_after
            )
            await sleep(exc.retry_after)


def file_label(language: str, kind: str, name: str | None) -> str:
    """`document “report.pdf”`, in the language: what a file is, and its name if it has one."""
    label = t(language, f"file.kind.{kind}") if has(f"file.kind.{kind}") else kind
    return t(language, "file.named", kind=label, name=name) if name else label
