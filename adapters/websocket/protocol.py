"""The web socket wire protocol: client frames checked, identities verified, frames as messages.

Everything here is pure (no I/O), so every rule of docs/websocket-protocol.md about what a client
may send is enforced in one place and raises `ProtocolError` with the error code to answer with.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from adapters.base import Action, ChatRef, InboundMessage
from content.parts import Part

ErrorCode = Literal[
    "bad_json",
    "unknown_type",
    "hello_required",
    "empty_text",
    "text_too_long",
    "rate_limited",
    "binary_not_supported",
    "identity_invalid",
    "bad_field",
    "hello_repeated",
    "internal_error",
    "try_later",
    "attachment_invalid",
    "queue_full",
]

CLOSE_IDENTITY_INVALID: Final = 4003
CLOSE_HELLO_TIMEOUT: Final = 4008
VISITOR_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9_-]{8,64}")
MAX_ID_CHARS: Final = 128
MAX_USER_ID_CHARS: Final = 256
MAX_ATTACHMENTS: Final = 10
MAX_LANGUAGE_CHARS: Final = 35  # the longest BCP 47 tag worth reading (RFC 5646 §4.4.1)


class ProtocolError(Exception):
    """A client frame we refuse; `code` goes back to the client in an `error` frame."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code: ErrorCode = code
        self.message = message


@dataclass(frozen=True, slots=True)
class Hello:
    visitor_id: str | None
    user_id: str | None
    user_hash: str | None
    resume_after: int | None
    # the page's language (a BCP 47 tag): the gateway's own texts follow it where it has them
    language: str | None = None
    epoch: str | None = None  # the `ready.epoch` that `resume_after` was counted in


@dataclass(frozen=True, slots=True)
class UserText:
    text: str
    client_message_id: str | None
    # as the client sent them (upload answers); the endpoint verifies each for its conversation
    attachments: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class Stop:
    pass


@dataclass(frozen=True, slots=True)
class ActionFrame:
    action_id: str
    value: str | None
    message_id: str | None
    label: str | None = None
    # the press's idempotency key, as a message's: a resent press is answered once
    client_message_id: str | None = None


ClientFrame = Hello | UserText | Stop | ActionFrame


def parse_client_frame(data: str, *, max_text_chars: int) -> tuple[ClientFrame, dict[str, Any]]:
    """One text frame → the typed frame and the decoded JSON object (kept as the raw payload)."""
    try:
        frame = json.loads(data)
    # Deep nesting ("[[[[...") raises RecursionError, not ValueError.
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(
            "bad_json", f"frame is not valid JSON ({exc}); send one JSON object per text frame"
        ) from exc
    if not isinstance(frame, dict):
        raise ProtocolError(
            "bad_json", 'frame must be a JSON object such as {"type": "message", "text": "hi"}'
        )
    kind = frame.get("type")
    parser = _PARSERS.get(kind) if isinstance(kind, str) else None
    if parser is None:
        raise ProtocolError(
            "unknown_type",
            f"unknown frame type {_preview(kind)}; expected one of {', '.join(_PARSERS)}",
        )
    return parser(frame, max_text_chars), frame


def user_hash(secret: str, user_id: str) -> str:
    """What a site's server puts next to `user_id` so the widget may speak for that user."""
    return hmac.new(secret.encode(), user_id.encode(), hashlib.sha256).hexdigest()


def resolve_identity(hello: Hello, visitor_id: str, secret: str | None) -> str:
    """The identity a hello proves: `u:<user_id>` when signed, else `v:<visitor_id>`."""
    if hello.user_id is None and hello.user_hash is None:
        return f"v:{visitor_id}"
    if secret is None:
        raise ProtocolError(
            "identity_invalid",
            "this server verifies no user ids (no identity_secret configured); "
            "omit user_id and user_hash to chat as a visitor",
        )
    if hello.user_id is None or hello.user_hash is None:
        raise ProtocolError("identity_invalid", "send user_id and user_hash together")
    expected = user_hash(secret, hello.user_id).encode()
    if not hmac.compare_digest(expected, hello.user_hash.encode("utf-8", "surrogatepass")):
        raise ProtocolError(
            "identity_invalid",
            "user_hash does not match user_id; compute it on your server as "
            "HMAC-SHA256(identity_secret, user_id) in lowercase hex",
        )
    return f"u:{hello.user_id}"


def _parse_hello(frame: dict[str, Any], max_text_chars: int) -> Hello:
    visitor_id = _optional_str(frame, "visitor_id", "bad_field", 64)
    if visitor_id is not None and not VISITOR_ID_PATTERN.fullmatch(visitor_id):
        raise ProtocolError(
            "bad_field",
            f"visitor_id {_preview(visitor_id)} must match ^[A-Za-z0-9_-]{{8,64}}$; "
            "omit it and the server assigns one in ready",
        )
    resume_after = frame.get("resume_after")
    if resume_after is not None and (
        not isinstance(resume_after, int) or isinstance(resume_after, bool) or resume_after < 0
    ):
        raise ProtocolError(
            "bad_field",
            f"resume_after must be the last seq you saw (an integer >= 0), "
            f"not {_preview(resume_after)}",
        )
    return Hello(
        visitor_id=visitor_id,
        user_id=_optional_str(frame, "user_id", "identity_invalid", MAX_USER_ID_CHARS),
        user_hash=_optional_str(frame, "user_hash", "identity_invalid", MAX_ID_CHARS),
        resume_after=resume_after,
        language=_language(frame.get("language")),
        epoch=_optional_str(frame, "epoch", "bad_field", 64),
    )


def _language(value: object) -> str | None:
    """A page's `lang` is the site's to write: a string of any shape is taken (one we have no
    texts for counts as none), only another type is refused."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ProtocolError(
            "bad_field", f'language must be a string such as "de-DE", not {_preview(value)}'
        )
    return value.strip()[:MAX_LANGUAGE_CHARS] or None


def _parse_message(frame: dict[str, Any], max_text_chars: int) -> UserText:
    attachments = _attachments(frame.get("attachments"))
    text = frame.get("text")
    if text is None and attachments:
        text = ""
    if text is None:
        raise ProtocolError("empty_text", "message needs a non-empty text")
    if not isinstance(text, str):
        raise ProtocolError("bad_field", f"text must be a string, not {type(text).__name__}")
    return UserText(
        text=_checked_text(text, "text", max_text_chars) if text or not attachments else "",
        client_message_id=_optional_str(frame, "client_message_id", "bad_field", MAX_ID_CHARS),
        attachments=attachments,
    )


def _attachments(value: object) -> tuple[Mapping[str, Any], ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise ProtocolError(
            "attachment_invalid", "attachments must be a list of the objects uploads answered"
        )
    if len(value) > MAX_ATTACHMENTS:
        raise ProtocolError(
            "attachment_invalid",
            f"{len(value)} attachments; at most {MAX_ATTACHMENTS} go with one message",
        )
    return tuple(value)


def _parse_stop(frame: dict[str, Any], max_text_chars: int) -> Stop:
    return Stop()


def _parse_action(frame: dict[str, Any], max_text_chars: int) -> ActionFrame:
    action_id = _optional_str(frame, "action_id", "bad_field", MAX_ID_CHARS)
    if action_id is None:
        raise ProtocolError("bad_field", "action needs an action_id (a non-empty string)")
    value = frame.get("value")
    if value is not None and not isinstance(value, str):
        raise ProtocolError("bad_field", f"value must be a string, not {type(value).__name__}")
    return ActionFrame(
        action_id=action_id,
        value=_checked_text(value, "value", max_text_chars) if value and value.strip() else None,
        message_id=_optional_str(frame, "message_id", "bad_field", MAX_ID_CHARS),
        label=_optional_str(frame, "label", "bad_field", MAX_ID_CHARS),
        client_message_id=_optional_str(frame, "client_message_id", "bad_field", MAX_ID_CHARS),
    )


_PARSERS: dict[str, Callable[[dict[str, Any], int], ClientFrame]] = {
    "hello": _parse_hello,
    "message": _parse_message,
    "stop": _parse_stop,
    "action": _parse_action,
}


def _checked_text(text: str, name: str, max_chars: int) -> str:
    if not text.strip():
        raise ProtocolError("empty_text", f"{name} is empty; send some text")
    if len(text) > max_chars:
        raise ProtocolError(
            "text_too_long",
            f"{name} has {len(text)} characters; the limit is {max_chars}, so split it",
        )
    _require_encodable(text, name, "bad_field")
    return text


def _optional_str(frame: dict[str, Any], name: str, code: ErrorCode, max_chars: int) -> str | None:
    value = frame.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > max_chars:
        raise ProtocolError(
            code, f"{name} must be a non-empty string of at most {max_chars} characters"
        )
    _require_encodable(value, name, code)
    return value


def _require_encodable(value: str, name: str, code: ErrorCode) -> None:
    # JSON may carry a lone "\ud800"; it would fail later when we encode a reply as UTF-8.
    try:
        value.encode()
    except UnicodeEncodeError as exc:
        raise ProtocolError(code, f"{name} contains an unpaired UTF-16 surrogate") from exc


def _preview(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def new_id(prefix: str) -> str:
    """A short unique id for a message: `m_` ours, `c_` the client's when it sent none."""
    return prefix + uuid.uuid4().hex[:12]


def now_stamp() -> str:
    """A message's `at`: UTC to the second, ISO 8601 (`2026-12-02T06:05:09Z`), for the client
    to show in its own time zone; the replay keeps it, so a reload shows when it was said.
    Formatted once a second (a turn's frames in the same second share it: ~5 us each)."""
    second = time.time() // 1
    last = _last_stamp[0]
    if last[0] != second:
        last = _last_stamp[0] = (second, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second)))
    return last[1]


_last_stamp: list[tuple[float, str]] = [(-1.0, "")]  # the second formatted last, and its text


def inbound_message(
    channel: str,
    identity: str,
    frame: UserText | Stop | ActionFrame,
    raw: dict[str, Any],
    parts: tuple[Part, ...] = (),
) -> InboundMessage:
    """What the gateway receives for a client frame; `stop` becomes the `/stop` command.
    `parts`: the frame's attachments, verified."""
    chat = ChatRef(channel=channel, chat_id=identity)
    if isinstance(frame, UserText):
        cmid = frame.client_message_id
        return InboundMessage(
            chat=chat,
            user_id=identity,
            text=frame.text,
            parts=parts,
            # Stable for a resent client_message_id, so the gateway answers it once.
            event_id=f"ws:{identity}:{cmid}" if cmid else f"ws:{uuid.uuid4().hex}",
            message_id=cmid or new_id("c_"),
            mentioned=True,
            raw=raw,
        )
    action = None
    cmid = None
    if isinstance(frame, ActionFrame):
        action = Action(frame.action_id, frame.value, frame.label, frame.message_id)
        cmid = frame.client_message_id  # one id space with messages, as the API's /actions
    return InboundMessage(
        chat=chat,
        user_id=identity,
        text="/stop" if isinstance(frame, Stop) else "",
        action=action,
        event_id=f"ws:{identity}:{cmid}" if cmid else f"ws:{uuid.uuid4().hex}",
        message_id=cmid or new_id("c_"),
        mentioned=True,
        raw=raw,
    )
