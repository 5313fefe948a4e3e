"""Our messages as Chat Completions items: `tool_calls` on the assistant, role "tool" for results,
a user's media as content parts (media.py); each message encoded once and kept (wire.py).

A tool message takes text only, so the images tool results carry (an MCP server's chart, a
payment's QR code) follow the round's last tool message as one user message, when the model
takes images; the tool message describes them in its text as before."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent.providers.image_plan import Plan, plan_images
from agent.providers.media import (
    ALL_MEDIA,
    Media,
    as_text,
    descriptions,
    file_text,
    forget,
    loaded,
)
from agent.providers.wire import cached, dumps, extended, keep
from agent.types import Message, ToolCall
from content.parts import FilePart, ImagePart, Part, TextPart


def to_openai(
    system: str, messages: Sequence[Message], media: Media = ALL_MEDIA
) -> list[dict[str, Any]]:
    """Our messages for Chat Completions: `tool_calls` on the assistant, role "tool" for results."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    shown: list[dict[str, Any]] = []
    for message in messages:
        if shown and message.role != "tool":
            out.append(_follow_up(shown))
            shown = []
        if message.role == "tool" and message.parts:
            shown.extend(_tool_images(message, media))
        item = _item(message, media)
        if item is not None:
            out.append(item)
    if shown:
        out.append(_follow_up(shown))
    return out


def _items(
    messages: Sequence[Message], media: Media = ALL_MEDIA, plan: Plan | None = None
) -> list[bytes]:
    """The history's items, encoded once per message and joined with commas (one item of the
    JSON array, or none); like anthropic.py's turns, what the last request of this history made
    of it is kept on its newest message (wire.py), so a request walks only the messages the
    last one did not have."""
    prefix_key = _PREFIX + media.key
    plan = plan or plan_images(messages, media, prefix_key, ())
    prefix, start = plan.prefix, plan.start
    added: list[bytes] = []
    shown: list[bytes] = []  # the images of this round's tool results so far, encoded
    for index in range(start, len(messages)):
        message = messages[index]
        if shown and message.role != "tool":
            added.append(_follow_up_bytes(shown))
            shown = []
        if not message.parts:
            added.append(cached(message, "openai", _encode))
            continue
        key = plan.key(BASE + media.key, index, message)
        if message.role == "tool":  # before _media_item: it drops the bytes it read
            images = key.replace(BASE, _IMAGES, 1)
            shown.extend(cached(message, images, lambda m: _encoded_images(m, media)))
        added.append(_media_item(message, media, key))
    if shown:
        added.append(_follow_up_bytes(shown))
    # an empty assistant message is left out
    items = extended(prefix.made if prefix else b"", [piece for piece in added if piece])
    keep(messages, prefix_key, start, (items, plan.seen))
    return [items] if items else []


_PREFIX = "openai-prefix:"
BASE = "openai:"  # a message with parts: its item is kept under BASE, media key, plan marks
_IMAGES = "openai-tool-images:"
FOLLOW_UP = "[The images the tool results above attached:]"


def _tool_images(message: Message, media: Media) -> list[dict[str, Any]]:
    """The image parts of a tool message the model takes, as user content parts."""
    images: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ImagePart) and media.native(part) == "image":
            data = loaded(message, part)
            if data is not None:
                url = f"data:{data[0]};base64,{data[1]}"
                images.append({"type": "image_url", "image_url": {"url": url}})
    return images


def _encoded_images(message: Message, media: Media) -> tuple[bytes, ...]:
    # bytes, not dicts: kept on the message, they are nothing the cyclic GC walks (wire.py)
    return tuple(dumps(image) for image in _tool_images(message, media))


def _follow_up(images: list[dict[str, Any]]) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": FOLLOW_UP}, *images]}


_FOLLOW_UP_HEAD = dumps(_follow_up([]))[:-2]  # without the closing "]}"


def _follow_up_bytes(images: list[bytes]) -> bytes:
    return b"".join([_FOLLOW_UP_HEAD, b",", b",".join(images), b"]}"])


def _encode(message: Message, media: Media = ALL_MEDIA) -> bytes:
    item = _item(message, media)
    return b"" if item is None else dumps(item)


def _media_item(message: Message, media: Media, key: str) -> bytes:
    """A message with parts: its wire form depends on what the model takes (media.py) and on
    which of its images are live (image_plan.py); the form kept for another plan goes."""
    item: bytes | None = message.derived.get(key)
    if item is None:
        for family in (BASE + media.key, _IMAGES + media.key):
            for old in [k for k in message.derived if _of(k, family) and k != key]:
                if old != key.replace(BASE, _IMAGES, 1):
                    del message.derived[old]
        item = message.derived[key] = _encode(message, media)
        forget(message)
    return item


def _of(key: str, family: str) -> bool:
    return key == family or key.startswith(family + ":")


def _item(message: Message, media: Media = ALL_MEDIA) -> dict[str, Any] | None:
    # the API takes media in user messages only: a tool's or the bot's own are described
    carried, described = _media_parts(message, media) if message.parts else ([], "")
    content_text = "\n".join(t for t in (message.content, described) if t)
    if message.role == "tool":
        content = content_text or "(no output)"
        if message.is_error and not content.lower().startswith("error"):
            content = f"Error: {content}"  # the API has no is_error flag
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": content}
    if message.role == "assistant":
        if not content_text and not message.tool_calls:
            return None
        item: dict[str, Any] = {"role": "assistant", "content": content_text or None}
        if message.tool_calls:
            item["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": _object_text(c)},
                }
                for c in message.tool_calls
            ]
        return item
    if not carried:
        return {"role": "user", "content": content_text}
    text = [{"type": "text", "text": content_text}] if content_text.strip() else []
    return {"role": "user", "content": [*text, *carried]}


def _media_parts(message: Message, media: Media) -> tuple[list[dict[str, Any]], str]:
    """A user message's content parts for what the model takes, and the rest described."""
    carried: list[dict[str, Any]] = []
    rest: list[Part] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            carried.append({"type": "text", "text": part.text})
            continue
        how = media.native(part) if message.role == "user" else None
        data = loaded(message, part) if how is not None else None
        if how is None or data is None:
            rest.append(part)
        elif as_text(how, data):
            assert isinstance(part, FilePart)
            carried.append({"type": "text", "text": file_text(part, data[1])})
        elif how == "image":
            url = f"data:{data[0]};base64,{data[1]}"
            carried.append({"type": "image_url", "image_url": {"url": url}})
        else:
            file = {
                "filename": part.blob.name or "file.pdf",
                "file_data": f"data:{data[0]};base64,{data[1]}",
            }
            carried.append({"type": "file", "file": file})
    return carried, descriptions(message, rest)


def _object_text(call: ToolCall) -> str:
    """The call's arguments if they are a JSON object, else "{}": some servers parse history."""
    return call.arguments if call.arguments_object() or call.arguments.strip() == "{}" else "{}"
