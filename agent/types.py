"""Provider-neutral model vocabulary: messages, tool calls, requests and the events a model streams."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field, fields
from typing import Any, Literal, Protocol

from content.parts import BlobRef, Part
from tools.base import ToolSpec

Role = Literal["user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text exactly as the model sent it; parsed and validated by the registry

    def arguments_object(self) -> dict[str, Any]:
        """The arguments as a JSON object, or {} when they are not one (APIs want an object back)."""
        try:
            value = json.loads(self.arguments) if self.arguments.strip() else {}
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # on role="tool": the call this answers
    name: str | None = None  # on role="tool": the tool's name
    is_error: bool = False  # on role="tool": the call failed
    usage: Usage | None = None  # on role="assistant": what the model call that wrote it cost
    # Media beside `content` (images, files, audio by blob reference); `content` stays the text.
    parts: tuple[Part, ...] = ()
    # Derived forms computed once per message (a vendor's wire bytes, a token estimate): a
    # history is sent again on every model call, so its cost must not be paid again each time.
    # Keyed by who derived it; never part of the message's value.
    derived: dict[str, Any] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )


# A frozen dataclass's `__init__` sets each field through `object.__setattr__` (the class's own
# refuses), a call a field: ~1.3 us a message, where a store reading a history back makes
# thousands (bot/storage/history_cache.py). `message_of` sets the slots directly, ~0.5 us.
_MESSAGE_FIELDS = tuple(f.name for f in fields(Message))
_SET = ("role", "content", "tool_calls", "tool_call_id", "name", "is_error", "usage", "parts")
if (*_SET, "derived") != _MESSAGE_FIELDS:  # a field added to Message must be added here too
    raise TypeError(f"message_of sets {_SET}, Message has {_MESSAGE_FIELDS}")
_role, _content, _calls, _call_id, _name, _is_error, _usage, _parts, _derived = (
    getattr(Message, name).__set__ for name in _MESSAGE_FIELDS
)
_new_object = object.__new__


def message_of(
    role: Role,
    content: str,
    tool_calls: tuple[ToolCall, ...],
    tool_call_id: str | None,
    name: str | None,
    is_error: bool,
    usage: Usage | None,
    parts: tuple[Part, ...],
) -> Message:
    """`Message(...)` with every field given, for values already checked (a stored row)."""
    message: Message = _new_object(Message)
    _role(message, role)
    _content(message, content)
    _calls(message, tool_calls)
    _call_id(message, tool_call_id)
    _name(message, name)
    _is_error(message, is_error)
    _usage(message, usage)
    _parts(message, parts)
    _derived(message, {})
    return message


class BlobReader(Protocol):
    """Reads a blob's media type and bytes (`content.blobs.BlobStore` is one), and keeps the
    small marks the providers leave (an image a model refused: media_load.py)."""

    async def get(self, blob_id: str) -> tuple[str, bytes]: ...

    async def put(
        self, data: bytes, *, mime_type: str, name: str | None = None, source: str | None = None
    ) -> BlobRef: ...


@dataclass(frozen=True, slots=True)
class ModelRequest:
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    model: str | None = None
    max_tokens: int = 4096
    # where the bytes of the messages' media parts are read (a `BlobStore`); None: described
    blobs: BlobReader | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    call: ToolCall


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    provider: str | None = None  # who served the call (in a fallback chain, not always the first)
    model: str | None = None


@dataclass(frozen=True, slots=True)
class Stop:
    reason: Literal["end_turn", "tool_use", "max_tokens", "other"] = "end_turn"


@dataclass(frozen=True, slots=True)
class StreamRestart:
    """The call failed after some events and starts over (a retry or the fallback provider):
    forget the text and tool calls streamed so far in this call; usage already reported stands."""


ModelEvent = TextDelta | ToolCallEvent | Usage | Stop | StreamRestart
# a generator, not just an iterator: callers close it (aclosing) to end the HTTP stream at once
ModelStream = AsyncGenerator[ModelEvent, None]


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One tool call, as the audit log keeps it."""

    session_id: str
    turn_id: str | None
    call_id: str
    tool_name: str
    arguments: str  # as the model sent them
    result: str  # truncated
    ok: bool
    duration_ms: float
    extra: dict[str, Any] = field(default_factory=dict)
