"""Before a turn: the files its messages announced, fetched into the blob store by their channel.

A fetched file becomes a part of its message. A file the channel refuses (over the size cap,
checked before downloading) or fails to fetch stays an attachment (the model reads its label) and
its sender is told why in a reply of its own; the rest of the message is answered. After the
turn, `send_parts` sends the answer's media where the channel sends them one by one.
A channel that cannot fetch, or a gateway without a blob store, leaves the attachments as the
platform announced them (the turn reads their labels).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
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
    SendsParts,
    megabytes,
)
from content.blobs import BlobError, BlobStore
from content.parts import AudioPart, BlobRef, MediaPart, Part, TextPart, media_part
from content.texts import DEFAULT_LANGUAGE, has, t

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
    channel: Channel,
    blobs: BlobStore | None,
    batch: Sequence[InboundMessage],
    language: str = DEFAULT_LANGUAGE,
) -> Fetched:
    """`language`: the conversation's, for the replies that say why a file was left out."""
    # a text-only batch costs nothing more (a runtime Protocol check is not free)
    if blobs is None or not any(m.attachments for m in batch):
        return Fetched(list(batch))
    if not isinstance(channel, FetchesFiles):
        return Fetched(list(batch))
    fetched, refusals = [], []
    for message in batch:
        parts, left = list(message.parts), []
        for attachment in message.attachments:
            try:
                parts.append(_part(attachment, await channel.fetch(message, attachment, blobs)))
                continue
            except FileTooLarge as exc:
                log.info("%s in %s refused: %s", attachment.kind, message.chat.key, exc)
                size = f" ({megabytes(exc.size)})" if exc.size is not None else ""
                what = file_label(language, attachment.kind, attachment.name)
                limit = megabytes(exc.limit)
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
) -> list[str]:
    """An answer's media parts, sent after its final text where the channel sends them one by
    one (`SendsParts`, and `ChannelLimits.parts_inline` false); what could not be sent, as lines
    to tell the user. A channel of neither kind has them on its final content only."""
    media = [part for part in parts if not isinstance(part, TextPart)]
    inline = channel.limits_for(chat).parts_inline
    if not media or inline or blobs is None or not isinstance(channel, SendsParts):
        return []
    failed = []
    for part in media:
        try:
            await channel.send_part(chat, part, blobs, reply_to=reply_to)
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
) -> None:
    """`send_parts`, and a part that could not be sent said in a last message of its own."""
    failed = await send_parts(channel, chat, parts, blobs, reply_to=reply_to, language=language)
    if not failed:
        return
    try:
        await channel.send(chat, OutboundContent("\n".join(failed)), reply_to=reply_to, final=True)
    except ChannelError as exc:
        log.warning("files not sent in %s, nor said: %s", chat.key, exc)


def file_label(language: str, kind: str, name: str | None) -> str:
    """`document “report.pdf”`, in the language: what a file is, and its name if it has one."""
    label = t(language, f"file.kind.{kind}") if has(f"file.kind.{kind}") else kind
    return t(language, "file.named", kind=label, name=name) if name else label
