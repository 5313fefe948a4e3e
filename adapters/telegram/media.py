"""Files in and out of Telegram: `getFile` then the file download, and sendPhoto / sendDocument /
sendVoice / sendAudio as multipart uploads.

The download URL holds the bot token: it is built here, used once and never logged, and an
error that would print it (aiohttp's names the URL) leaves as a `ChannelError` of our own words.
`getFile` serves files of up to 20 MB, so a larger one is refused from its declared size
without a call: asking would only fail, and a peer's polling died on that failure.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
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
SVG = "image/svg+xml"  # a file, never an image: Telegram would not show it anyway

Call = Callable[[ChatRef, Rank], AbstractAsyncContextManager[None]]


async def fetch(
    bot: Bot, message: InboundMessage, attachment: Attachment, blobs: BlobStore, timeout_s: float
) -> BlobRef:
    limit = limit_for(blobs, GET_FILE_LIMIT)
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
    send = _method(bot, part)
    async with call(chat, "final"):
        return await send(
            chat.chat_id,
            upload,
            caption=_caption(caption),
            message_thread_id=thread,
            reply_parameters=reply,
        )


def _method(bot: Bot, part: MediaPart) -> Callable[..., Awaitable[Message]]:
    """A photo up to Telegram's 10 MB (larger, or an SVG, goes as a document); a voice note in
    OGG/Opus, other audio as audio; anything else a document."""
    blob = part.blob
    if isinstance(part, ImagePart) and blob.size <= PHOTO_LIMIT and blob.mime_type != SVG:
        return bot.send_photo
    if isinstance(part, AudioPart):
        return bot.send_voice if blob.mime_type in VOICE_TYPES else bot.send_audio
    return bot.send_document


def _caption(caption: str | None) -> str | None:
    if not caption:
        return None
    return caption if len(caption) <= CAPTION_LIMIT else caption[: CAPTION_LIMIT - 1] + "…"
