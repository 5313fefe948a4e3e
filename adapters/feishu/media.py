"""Files in and out of Feishu: the message-resource download, image/file upload then a message.

Download: `GET /open-apis/im/v1/messages/{message_id}/resources/{key}?type=image|file` with the
tenant token. lark-oapi's `message_resource.aget` reads the whole answer into memory before it
returns, and Feishu's events declare no file size, so the download is streamed here (httpx, as
the SDK's own transport) and cut at the cap; a `Content-Length` over it is refused unread.
Upload: lark-oapi's `im.v1.image.acreate` (≤ 10 MB images; a larger one goes as a file) or
`im.v1.file.acreate`, then an `image`, `file` or `audio` message through the channel's outbound.
"""

from __future__ import annotations

import io
import json

import httpx

from adapters.base import Attachment, ChannelError, FileTooLarge, InboundMessage, RateLimited
from adapters.feishu.api import RATE_LIMITED, TOKEN_INVALID, ApiError, FeishuApi
from adapters.feishu.sdk import (
    BaseResponse,
    CreateFileRequest,
    CreateFileRequestBody,
    CreateImageRequest,
    CreateImageRequestBody,
    File,
    Files,
    Image,
    RequestOption,
)
from adapters.media import check_declared, collect, file_name, keep, limit_for
from content.blobs import BlobStore
from content.parts import AudioPart, BlobRef, ImagePart, MediaPart

RESOURCE_LIMIT = 100 * 1024 * 1024  # the message-resource API's own cap [doc]
IMAGE_LIMIT = 10 * 1024 * 1024
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/webp", "image/gif", "image/bmp"})
FILE_TYPES = {  # Feishu's `file_type` by media type; anything else is a "stream"
    "application/pdf": "pdf",
    "application/msword": "doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "doc",
    "application/vnd.ms-excel": "xls",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xls",
    "application/vnd.ms-powerpoint": "ppt",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "ppt",
    "video/mp4": "mp4",
    "audio/ogg": "opus",
    "audio/opus": "opus",
}


async def fetch(
    api: FeishuApi,
    base_url: str,
    message: InboundMessage,
    attachment: Attachment,
    blobs: BlobStore,
    timeout_s: float,
) -> BlobRef:
    limit = limit_for(blobs, RESOURCE_LIMIT)
    check_declared(attachment, limit)
    if not message.message_id or not attachment.platform_id:
        raise ChannelError(f"a Feishu {attachment.kind} without its message id or key")
    url = f"{base_url}/open-apis/im/v1/messages/{message.message_id}/resources/{attachment.platform_id}"
    query = {"type": "image" if attachment.kind == "photo" else "file"}
    for attempt in (1, 2):
        headers = {"Authorization": f"Bearer {await api.token(renew=attempt == 2)}"}
        try:
            async with (
                httpx.AsyncClient(timeout=timeout_s) as client,
                client.stream("GET", url, params=query, headers=headers) as response,
            ):
                if response.headers.get("content-type", "").startswith("application/json"):
                    answer = json.loads(await response.aread())
                    code = int(answer.get("code", -1))
                    if code in TOKEN_INVALID and attempt == 1:
                        continue
                    raise ApiError(code, str(answer.get("msg", "")), "the resource download")
                if response.status_code != 200:
                    raise ChannelError(f"Feishu resource download answered {response.status_code}")
                declared = response.headers.get("content-length")
                if declared is not None and declared.isdigit() and int(declared) > limit:
                    raise FileTooLarge(attachment, limit, int(declared))
                data = await collect(response.aiter_bytes(), attachment, limit)
                mime = response.headers.get("content-type")
        except (httpx.HTTPError, ValueError) as exc:
            raise ChannelError(f"Feishu resource download failed: {type(exc).__name__}") from None
        named = attachment if attachment.name else _named(attachment, response.headers)
        return await keep(blobs, data, named, source="feishu", mime_type=_useful(mime))
    raise AssertionError("unreachable")


def _named(attachment: Attachment, headers: httpx.Headers) -> Attachment:
    name = Files.parse_file_name({"Content-Disposition": headers.get("content-disposition")})
    if not name:
        return attachment
    return Attachment(attachment.kind, name, attachment.mime_type, attachment.size, None, None)


def _useful(mime: str | None) -> str | None:
    """Feishu serves most resources as application/octet-stream: that says nothing."""
    if not mime or mime.startswith("application/octet-stream"):
        return None
    return mime


async def upload(api: FeishuApi, part: MediaPart, data: bytes) -> tuple[str, str]:
    """The part uploaded; the message type and content that show it."""
    token = await api.token()
    option = RequestOption.builder().tenant_access_token(token).build()
    blob = part.blob
    try:
        if (
            isinstance(part, ImagePart)
            and blob.size <= IMAGE_LIMIT
            and blob.mime_type in IMAGE_TYPES
        ):
            body = CreateImageRequestBody.builder().image_type("message").image(io.BytesIO(data))
            request = CreateImageRequest.builder().request_body(body.build()).build()
            response = await Image(api.config).acreate(request, option)
            _check(response, "the image upload")
            return "image", json.dumps({"image_key": response.data.image_key})
        file_type = FILE_TYPES.get(blob.mime_type, "stream")
        builder = (
            CreateFileRequestBody.builder()
            .file_type(file_type)
            .file_name(file_name(blob, part.type))
            .file(io.BytesIO(data))
        )
        request_file = CreateFileRequest.builder().request_body(builder.build()).build()
        answer = await File(api.config).acreate(request_file, option)
        _check(answer, "the file upload")
        key = answer.data.file_key
        kind = "audio" if isinstance(part, AudioPart) and file_type == "opus" else "file"
        return kind, json.dumps({"file_key": key})
    except (httpx.HTTPError, ValueError) as exc:
        raise ChannelError(f"Feishu upload failed: {type(exc).__name__}") from None


def _check(response: BaseResponse, what: str) -> None:
    if response.success():
        return
    code, msg = int(response.code or -1), str(response.msg or "")
    if code in RATE_LIMITED:
        raise RateLimited(1.0, f"Feishu rate limit on {what} ({code})")
    raise ApiError(code, msg, what)
