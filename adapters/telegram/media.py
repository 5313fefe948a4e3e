"""Files in and out of Telegram: `getFile` then the file download, and sendPhoto / sendDocument /
sendVoice / sendAudio as multipart uploads.

The download URL holds the bot token: it is built here, used once and never logged, and an
error that would print it (aiohttp's names the URL) leaves as a `ChannelError` of our own words.
`getFile` serves files of up to 20 MB, so a larger one is refused from its declared size
without a call: asking would only fail, and a peer's polling died on that failure.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, aclosing

import aiohttp
from aiogram import Bot
from aiogram.exceptions import AiogramError, TelegramAPIError
from aiogram.types import BufferedInputFile, Message, ReplyParameters

from adapters.base import Attachment, ChannelError, ChatRef, FileTooLarge, InboundMessage
from adapters.budget import Rank
from adapters.media import check_declared, collect, file_name, keep, limit_for
from content.blobs import BlobStore
from content.parts import AudioPart, BlobRef, ImagePart, MediaPart

GET_FILE_LIMIT = 20 * 1024 * 1024  # the Bot API's own download cap (getFile)
PHOTO_LIMIT = 10 * 1024 * 1024  # a larger image goes as a document
CAPTION_LIMIT = 1024
VOICE_TYPES = frozenset({"audio/ogg", "audio/opus"})  # what Telegram plays as a voice note
PHOTO_SIDES = 10_000  # sendPhoto: width + height at most this
PHOTO_RATIO = 20  # sendPhoto: the long side at most this many times the short one
PHOTO_TYPES = frozenset({"image/jpeg", "image/png", "image/webp", "image/gif", "image/bmp"})

Call = Callable[[ChatRef, Rank], AbstractAsyncContextManager[None]]


# one size of a photo as Telegram offers it: (file_id, width, height, file_size)
PhotoSize = tuple[str, int, int, int | None]


def photo_within(sizes: Sequence[PhotoSize], limit: int) -> Attachment:
    """The photo as the largest of its sizes that fits `limit` (Telegram lists them small to
    large, but the last is not always the one to take: a big photo's original can pass the cap
    while a smaller rendition is perfectly readable). None fits: the smallest, refused from its
    declared size with a reply naming the limit."""
    fitting = [s for s in sizes if s[3] is None or s[3] <= limit]
    if fitting:
        chosen = max(fitting, key=lambda s: (s[1] * s[2], s[3] or 0))
    else:
        chosen = min(sizes, key=lambda s: s[3] or 0)
    return Attachment("photo", mime_type="image/jpeg", size=chosen[3], platform_id=chosen[0])


def _smaller_photo(message: InboundMessage, attachment: Attachment, limit: int) -> Attachment:
    """A photo over `limit` (the blob store's cap, under Telegram's) as a smaller size of the
    same photo, where the message offered one that fits (its sizes are in `raw`)."""
    if attachment.kind != "photo" or attachment.size is None or attachment.size <= limit:
        return attachment
    offered = message.raw.get("message", {}).get("photo") if message.raw else None
    if not isinstance(offered, list) or not any(
        isinstance(s, dict) and s.get("file_id") == attachment.platform_id for s in offered
    ):
        return attachment
    sizes = [
        (str(s["file_id"]), int(s.get("width", 0)), int(s.get("height", 0)), s.get("file_size"))
        for s in offered
        if isinstance(s, dict) and "file_id" in s
    ]
    return photo_within(sizes, limit)


async def fetch(
    bot: Bot, message: InboundMessage, attachment: Attachment, blobs: BlobStore, timeout_s: float
) -> BlobRef:
    limit = limit_for(blobs, GET_FILE_LIMIT)
    attachment = _smaller_photo(message, attachment, limit)
    check_declared(attachment, limit)
    if not attachment.platform_id:
        raise ChannelError(f"the {attachment.kind} in {message.chat.key} names no file_id")
    try:
        file = await bot.get_file(attachment.platform_id)
    except TelegramAPIError as exc:
        raise ChannelError(f"Telegram getFile refused: {exc.message}") from None
    except (AiogramError, aiohttp.ClientError, OSError) as exc:
        raise ChannelError(f"Telegram getFile failed: {type(exc).__name__}") from None
    if file.file_size is not None and file.file_size > limit:
        raise FileTooLarge(attachment, limit, file.file_size)
    if not file.file_path:
        raise ChannelError("Telegram getFile gave no file_path (the file is over 20 MB?)")
    url = bot.session.api.file_url(bot.token, file.file_path)
    stream = bot.session.stream_content(url=url, timeout=int(timeout_s) or 1, raise_for_status=True)
    # aiohttp's errors name the URL, and so the token: raised outside the `except`, ours keeps
    # no trace of them (not even as its context)
    failure = ""
    try:
        async with aclosing(stream):
            data = await collect(stream, attachment, limit)
    except aiohttp.ClientResponseError as exc:
        failure = f"Telegram file download answered {exc.status}"
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        failure = f"Telegram file download failed: {type(exc).__name__}"
    if failure:
        raise ChannelError(failure)
    return await keep(blobs, data, attachment, source="telegram")


async def send_part(
    bot: Bot,
    call: Call,
    chat: ChatRef,
    part: MediaPart,
    data: bytes,
    *,
    caption: str | None,
    reply: ReplyParameters | None,
    thread: int | None,
) -> Message:
    blob = part.blob
    upload = BufferedInputFile(data, filename=file_name(blob, part.type))
    send = _method(bot, part, data)
    async with call(chat, "final"):
        return await send(
            chat.chat_id,
            upload,
            caption=_caption(caption),
            message_thread_id=thread,
            reply_parameters=reply,
        )


def _method(bot: Bot, part: MediaPart, data: bytes) -> Callable[..., Awaitable[Message]]:
    """A photo where Telegram takes one (else a document); a voice note in OGG/Opus, other
    audio as audio; anything else a document."""
    if isinstance(part, ImagePart) and as_photo(part.blob, data):
        return bot.send_photo
    if isinstance(part, AudioPart):
        return bot.send_voice if part.blob.mime_type in VOICE_TYPES else bot.send_audio
    return bot.send_document


def as_photo(blob: BlobRef, data: bytes) -> bool:
    """What sendPhoto takes: at most 10 MB, width + height at most 10000, the long side at most
    20 times the short one; anything else (an SVG, a file Pillow cannot read) is a document.
    Pillow reads the dimensions from the header alone, without decoding the pixels."""
    if blob.size > PHOTO_LIMIT or blob.mime_type not in PHOTO_TYPES:
        return False
    from PIL import Image  # here: Pillow is imported when an image goes out, not at start

    try:
        with warnings.catch_warnings():  # a pixel count Pillow warns about is no photo either
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                width, height = image.size
    except (OSError, ValueError, Image.DecompressionBombError, Image.DecompressionBombWarning):
        return False
    short, long = sorted((width, height))
    return short > 0 and width + height <= PHOTO_SIDES and long <= PHOTO_RATIO * short


def _caption(caption: str | None) -> str | None:
    if not caption:
        return None
    return caption if len(caption) <= CAPTION_LIMIT else caption[: CAPTION_LIMIT - 1] + "…"
