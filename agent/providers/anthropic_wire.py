"""Our messages as Messages API turns, from pieces encoded once per message (wire.py).

Tool results are `tool_result` blocks in a user turn (with their images: the API takes them
there), tool calls `tool_use` blocks; consecutive same-role turns merge (the API wants
alternation). Media go as the API's own blocks (media.py); which images go as images is the
request's plan (image_plan.py): a message's piece is kept per plan key.
"""

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
from agent.types import Message
from content.parts import FilePart, Part, TextPart

_PREFIX = "anthropic-prefix:"


def to_anthropic(messages: Sequence[Message], media: Media = ALL_MEDIA) -> list[dict[str, Any]]:
    """Our messages as Messages API turns: tool results are `tool_result` blocks in a user turn,
    tool calls `tool_use` blocks; consecutive same-role turns merge (the API wants alternation)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role, blocks = _blocks(message, media)
        if not blocks:
            continue  # an empty text block is refused
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def _turns(
    messages: Sequence[Message], media: Media = ALL_MEDIA, plan: Plan | None = None
) -> list[bytes]:
    """`to_anthropic` as encoded turns, from pieces encoded once per message: at most two items
    of the JSON array, the closed turns (joined with commas) and the last turn.

    A conversation's next request starts with the same messages as its last one, so what this
    made of them (the closed turns, and the pieces of the last turn, which the next message may
    still join) is kept on the newest message (wire.py) and only the messages after it are
    walked: a call costs the same at turn 1,000 as at turn 1, but for copying the bytes."""
    prefix_key = _PREFIX + media.key
    plan = plan or plan_images(messages, media, prefix_key, ())
    prefix, start = plan.prefix, plan.start
    closed: bytes = prefix.made[0] if prefix else b""
    group: list[_Piece] = list(prefix.made[1]) if prefix else []
    added: list[bytes] = []
    for index in range(start, len(messages)):
        message = messages[index]
        piece = (
            _media_piece(message, media, plan.key(BASE + media.key, index, message))
            if message.parts
            else cached(message, "anthropic", _encode)
        )
        if not piece[1]:
            continue  # an empty text block is refused
        if group and piece[0] != group[0][0]:
            added.append(_merged(group))
            group = []
        group.append(piece)
    closed = extended(closed, added)
    keep(messages, prefix_key, start, ((closed, tuple(group)), plan.seen))
    return [turns for turns in (closed, _merged(group) if group else b"") if turns]


BASE = "anthropic:"  # a message with parts: its piece is kept under BASE, media key, plan marks


# A message's piece: (role, its content blocks encoded and comma-separated, the message as a turn
# of its own, which most are). A plain tuple, not a class: every message of every cached history
# keeps one, and the cyclic collector stops walking a tuple of strings once it has seen it (an
# instance of a class, and the `derived` dict holding it, it walks in every full collection).
_Piece = tuple[str, bytes, bytes]


def _encode(message: Message, media: Media = ALL_MEDIA) -> _Piece:
    role, blocks = _blocks(message, media)
    encoded = b",".join(dumps(block) for block in blocks)
    return (role, encoded, _turn(role, [encoded]))


def _media_piece(message: Message, media: Media, key: str) -> _Piece:
    """A message with parts: its wire form depends on what the model takes (media.py) and on
    which of its images are live (image_plan.py); the form kept for another plan goes."""
    piece: _Piece | None = message.derived.get(key)
    if piece is None:
        family = BASE + media.key
        stale = [k for k in message.derived if k.startswith(family + ":") or k == family]
        for old in [k for k in stale if k != key]:
            del message.derived[old]
        piece = message.derived[key] = _encode(message, media)
        forget(message)
    return piece


def _merged(group: list[_Piece]) -> bytes:
    return group[0][2] if len(group) == 1 else _turn(group[0][0], [p[1] for p in group])


def _turn(role: str, blocks: list[bytes]) -> bytes:
    return b'{"role":"' + role.encode() + b'","content":[' + b",".join(blocks) + b"]}"


def _blocks(message: Message, media: Media = ALL_MEDIA) -> tuple[str, list[dict[str, Any]]]:
    carried, described = _media_blocks(message, media) if message.parts else ([], "")
    if message.role == "tool":
        text = "\n".join(t for t in (message.content, described) if t) or "(no output)"
        content: str | list[dict[str, Any]] = (
            [{"type": "text", "text": text}, *carried] if carried else text
        )
        result = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id or "",
            "content": content,
            "is_error": message.is_error,
        }
        return "user", [result]
    blocks: list[dict[str, Any]] = list(carried)  # media first, as the API's guide advises
    text = "\n".join(t for t in (message.content, described) if t.strip())
    if text.strip():
        blocks.append({"type": "text", "text": text})
    for call in message.tool_calls:
        use = {
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": call.arguments_object(),
        }
        blocks.append(use)
    return message.role, blocks


def _media_blocks(message: Message, media: Media) -> tuple[list[dict[str, Any]], str]:
    """The blocks of the parts the model takes (a user's, or a tool's), and the rest described."""
    blocks: list[dict[str, Any]] = []
    rest: list[Part] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            blocks.append({"type": "text", "text": part.text})
            continue
        how = media.native(part) if message.role != "assistant" else None
        data = loaded(message, part) if how is not None else None
        if how is None or data is None:
            rest.append(part)
        elif as_text(how, data):
            assert isinstance(part, FilePart)
            blocks.append({"type": "text", "text": file_text(part, data[1])})
        else:
            kind = "image" if how == "image" else "document"
            source = {"type": "base64", "media_type": data[0], "data": data[1]}
            blocks.append({"type": kind, "source": source})
    return blocks, descriptions(message, rest)
