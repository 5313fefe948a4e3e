"""A server's `CallToolResult` as the gateway's `ToolResult`: text for the model, media as parts.

Text content is joined; images and audio go into the blob store (`ctx.keep_blob`) and come back
as image / audio parts, each with a line of text so a text-only model still knows it is there;
embedded resources become their text, or a file part for binary ones; resource links a line;
structured content is appended as JSON unless the text already says it. `is_error` makes a
failed result with the server's own words. Nothing here raises on a strange result: a part that
cannot be kept is described instead.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import mcp.types as types

from content.parts import Part
from tools.base import ToolContext, ToolError, ToolResult


async def to_result(result: types.CallToolResult, ctx: ToolContext, label: str) -> ToolResult:
    """`label`: how the text names the tool (`files/read_file`)."""
    lines: list[str] = []
    parts: list[Part] = []
    for index, item in enumerate(result.content):
        if isinstance(item, types.TextContent):
            lines.append(item.text)
        elif isinstance(item, types.ImageContent | types.AudioContent):
            kind = "image" if isinstance(item, types.ImageContent) else "audio"
            name = f"{kind}-{index + 1}{_extension(item.mime_type)}"
            lines.append(await _keep(ctx, item.data, item.mime_type, name, parts))
        elif isinstance(item, types.EmbeddedResource):
            lines.append(await _resource(ctx, item.resource, parts))
        elif isinstance(item, types.ResourceLink):
            mime = f", {item.mime_type}" if item.mime_type else ""
            lines.append(f"[resource link: {item.name} <{item.uri}>{mime}]")
    structured = result.structured_content
    if structured is not None and not _says(lines, structured):
        lines.append(json.dumps(structured, ensure_ascii=False, default=str))
    text = "\n".join(lines)
    if result.is_error:
        return ToolResult(f"{label} reported an error: {text or '(no details)'}", ok=False)
    return ToolResult(text or "(no output)", parts=tuple(parts))


def _says(lines: list[str], structured: dict[str, Any]) -> bool:
    """Whether the text already is the structured content (servers are asked to send both)."""
    # a plain return value comes back wrapped as {"result": value}
    wrapped = structured.get("result", structured) if len(structured) == 1 else structured
    if isinstance(wrapped, str) and wrapped in lines:
        return True
    for line in lines:
        try:
            if json.loads(line) in (structured, wrapped):
                return True
        except ValueError:
            continue
    return False


async def _resource(
    ctx: ToolContext,
    resource: types.TextResourceContents | types.BlobResourceContents,
    parts: list[Part],
) -> str:
    uri = str(resource.uri)
    if isinstance(resource, types.TextResourceContents):
        return f"[resource {uri}]\n{resource.text}"
    name = uri.rstrip("/").rsplit("/", 1)[-1] or "resource"
    mime = resource.mime_type or "application/octet-stream"
    return await _keep(ctx, resource.blob, mime, name, parts)


async def _keep(ctx: ToolContext, data: str, mime: str, name: str, parts: list[Part]) -> str:
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return f"[{name}: {mime}, not valid base64; not kept]"
    try:
        part = await ctx.keep_blob(raw, mime_type=mime, name=name)
    except ToolError as exc:
        return f"[{name}: {mime}, {len(raw)} bytes; not kept: {exc}]"
    if part is None:
        return f"[{name}: {mime}, {len(raw)} bytes; this gateway keeps no media]"
    parts.append(part)
    return f"[{part.type} {name}: {mime}, {len(raw)} bytes, attached]"


def _extension(mime: str) -> str:
    sub = mime.partition("/")[2].split(";")[0].strip().lower()
    return {"jpeg": ".jpg", "svg+xml": ".svg", "mpeg": ".mp3"}.get(sub, f".{sub}" if sub else "")
