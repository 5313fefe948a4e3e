"""Requests read and checked: JSON bodies, query cursors, `Last-Event-ID`; refusals are `ApiError`.

Message and action bodies obey exactly the web socket protocol's rules for the `message` and
`action` frames (adapters/websocket/protocol.py), so both channels refuse the same input.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web

from adapters.api.errors import ApiError
from adapters.websocket.protocol import (
    MAX_USER_ID_CHARS,
    ActionFrame,
    ProtocolError,
    UserText,
    parse_client_frame,
)

MAX_PAGE: Final = 100
MAX_CURSOR: Final = 2**53  # what JSON clients (JavaScript) count exactly
_EVENT_ID: Final = re.compile(r"[0-9]{1,15}")
_FIELDS: Final = {
    "message": ("text", "client_message_id", "attachments"),
    "action": ("action_id", "value", "label", "message_id"),
}


@dataclass(frozen=True, slots=True)
class Page:
    limit: int
    before: int | None
    after: int | None


async def json_object(request: web.Request, *, optional: bool = False) -> dict[str, Any]:
    """The body as a JSON object; an empty body is `{}` where the body is optional (an empty
    one: a body of blanks is a body, and not JSON)."""
    raw = await request.read()  # over client_max_size: aiohttp raises 413
    if not raw and optional:
        return {}
    if request.content_type != "application/json":
        raise ApiError(
            415,
            "unsupported_media_type",
            f"send the body as JSON with Content-Type: application/json, not {request.content_type!r}",
        )
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise ApiError(400, "bad_json", f"the body is not valid JSON ({exc})") from exc
    if not isinstance(body, dict):
        raise ApiError(400, "bad_json", 'the body must be a JSON object, e.g. {"text": "hi"}')
    return body


def user_text(body: dict[str, Any], max_text_chars: int) -> UserText:
    frame = _frame("message", body, max_text_chars)
    assert isinstance(frame, UserText)
    return frame


def action(body: dict[str, Any], max_text_chars: int) -> ActionFrame:
    frame = _frame("action", body, max_text_chars)
    assert isinstance(frame, ActionFrame)
    return frame


def client_id(body: dict[str, Any]) -> str | None:
    """An action's optional `client_message_id`, checked as a message's is."""
    value = body.get("client_message_id")
    if value is None:
        return None
    return user_text({"text": "-", "client_message_id": value}, 1).client_message_id


def session_user(body: dict[str, Any]) -> str | None:
    user_id = body.get("user_id")
    if user_id is None:
        return None
    if not isinstance(user_id, str) or not user_id.strip() or len(user_id) > MAX_USER_ID_CHARS:
        raise ApiError(
            400,
            "bad_field",
            f"user_id must be a non-empty string of at most {MAX_USER_ID_CHARS} characters",
        )
    _encodable(user_id, "user_id")
    return user_id


def page(request: web.Request) -> Page:
    query = request.query
    unknown = sorted(set(query) - {"limit", "before", "after"})
    if unknown:
        raise ApiError(
            400, "bad_field", f"unknown query parameter {unknown[0]!r}; use limit, before, after"
        )
    repeated = sorted(name for name in set(query) if len(query.getall(name)) > 1)
    if repeated:  # which one was meant? (a client that sends an array, say)
        raise ApiError(400, "bad_field", f"query parameter {repeated[0]!r} is given twice")
    before, after = _cursor(query.get("before"), "before"), _cursor(query.get("after"), "after")
    limit = _cursor(query.get("limit"), "limit")
    if limit is not None and not 1 <= limit <= MAX_PAGE:
        raise ApiError(400, "bad_field", f"limit must be 1 to {MAX_PAGE}, not {limit}")
    return Page(limit=limit or 50, before=before, after=after)


def last_event_id(request: web.Request) -> int | None:
    """`Last-Event-ID`: the `id:` of the last event the client saw (a session's seq)."""
    value = request.headers.get("Last-Event-ID")
    if value is None:  # EventSource sends none at first
        return None
    if not _EVENT_ID.fullmatch(value):
        raise ApiError(
            400,
            "bad_field",
            f"Last-Event-ID must be the id of an event (1-15 digits), not {value[:40]!r}",
        )
    return int(value)


def _cursor(value: str | None, name: str) -> int | None:
    if value is None:
        return None
    if not (value.isascii() and value.isdigit()) or int(value) > MAX_CURSOR:
        raise ApiError(
            400, "bad_field", f"{name} must be a whole number from 0 to 2^53, not {value[:40]!r}"
        )
    return int(value)


def _frame(kind: str, body: dict[str, Any], max_text_chars: int) -> UserText | ActionFrame:
    fields = {name: body[name] for name in _FIELDS[kind] if name in body}  # others are ignored
    try:
        encoded = json.dumps({**fields, "type": kind})
    except (ValueError, RecursionError) as exc:  # nested past what JSON encoding takes
        raise ApiError(400, "bad_field", f"a field of the body cannot be read ({exc})") from exc
    try:
        frame, _ = parse_client_frame(encoded, max_text_chars=max_text_chars)
    except ProtocolError as exc:
        raise ApiError(400, exc.code, exc.message) from exc
    assert isinstance(frame, UserText | ActionFrame)
    return frame


def _encodable(value: str, name: str) -> None:
    try:
        value.encode()
    except UnicodeEncodeError as exc:
        raise ApiError(400, "bad_field", f"{name} contains an unpaired UTF-16 surrogate") from exc
