"""Files in and out of Slack: `url_private` downloads with the bot token, `files_upload_v2` up.

A shared file's URL needs `Authorization: Bearer <bot token>`; without the `files:read` scope
Slack answers 200 with its HTML login page, not an error, so an HTML answer is refused as that.
The token goes only to Slack's own hosts (or the API host we were configured with). A Slack
Connect file comes without URLs (`file_access: check_file_info`): `files.info` gives them.
Uploads are slack_sdk's `files_upload_v2`: `files.getUploadURLExternal`, the bytes POSTed to the
URL it gives, then `files.completeUploadExternal` into the channel and thread.
"""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlsplit

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.base import Attachment, ChannelError, FileTooLarge, InboundMessage
from adapters.media import check_declared, collect, file_name, keep, limit_for
from adapters.slack import errors
from content.blobs import BlobStore
from content.parts import BlobRef, MediaPart

SLACK_HOST = "slack.com"
LOGIN_PAGE = "text/html"
CAPTION_LIMIT = 3900  # an initial comment is a message's text


async def fetch(
    client: AsyncWebClient,
    session: aiohttp.ClientSession,
    message: InboundMessage,
    attachment: Attachment,
    blobs: BlobStore,
) -> BlobRef:
    limit = limit_for(blobs)
    check_declared(attachment, limit)
    url = attachment.url
    if url is None:
        url, attachment = await _file_info(client, attachment)
        check_declared(attachment, limit)
    if not _ours(url, client.base_url):
        raise ChannelError(f"a Slack file in {message.chat.key} points off Slack; not fetched")
    headers = {"Authorization": f"Bearer {client.token}"}
    try:
        async with session.get(url, headers=headers, allow_redirects=True) as response:
            if response.status != 200:
                raise ChannelError(f"Slack file download answered {response.status}")
            if response.content_type == LOGIN_PAGE:
                raise ChannelError(
                    "Slack answered the file download with its login page: the app lacks the "
                    "files:read scope (add it and reinstall the app)"
                )
            if response.content_length is not None and response.content_length > limit:
                raise FileTooLarge(attachment, limit, response.content_length)
            data = await collect(response.content.iter_chunked(65536), attachment, limit)
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise ChannelError(f"Slack file download failed: {type(exc).__name__}") from None
    return await keep(blobs, data, attachment, source="slack")


async def _file_info(client: AsyncWebClient, attachment: Attachment) -> tuple[str, Attachment]:
    """A Slack Connect file's URL, and its name, type and size where the event left them out
    (its `files[]` entry may say no more than the id and `file_access: check_file_info`)."""
    if not attachment.platform_id:
        raise ChannelError("a Slack file with neither a URL nor an id")
    try:
        info = await client.files_info(file=attachment.platform_id)
    except SlackApiError as exc:
        raise ChannelError(f"Slack files.info refused: {errors.error_code(exc)}") from None
    except (SlackClientError, aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise ChannelError(f"Slack files.info failed: {type(exc).__name__}") from None
    file = info.get("file") or {}
    size = file.get("size")
    url = file.get("url_private_download") or file.get("url_private")
    if not isinstance(url, str):
        raise ChannelError("Slack files.info gave no URL for the file")
    name, mime = file.get("name"), file.get("mimetype")
    known = replace(
        attachment,
        name=attachment.name or (name if isinstance(name, str) else None),
        mime_type=attachment.mime_type or (mime if isinstance(mime, str) else None),
        size=size if isinstance(size, int) else attachment.size,
    )
    return url, known


def _ours(url: str, api_base: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    configured = (urlsplit(api_base).hostname or "").lower()
    return host in (configured, SLACK_HOST) or host.endswith("." + SLACK_HOST)


async def upload(
    client: AsyncWebClient,
    channel: str,
    thread_ts: str | None,
    part: MediaPart,
    data: bytes,
    caption: str | None,
) -> str:
    """The part uploaded into the channel (and thread); the uploaded file's id."""
    name = file_name(part.blob, part.type)
    comment = caption[:CAPTION_LIMIT] if caption else None
    response = await client.files_upload_v2(
        channel=channel,
        thread_ts=thread_ts,
        content=data,
        filename=name,
        title=name,
        initial_comment=comment,
    )
    file = response.get("file") or {}
    return str(file.get("id", ""))
