"""The sessions API's OpenAPI 3.1 document, served at /api/v1/openapi.json.

tests/test_api_openapi.py checks it against the routes the channel installs, and drives the
running API with schemathesis from it.
"""

from __future__ import annotations

from typing import Any, Final

from adapters.api.openapi_events import (
    ATTACHMENT_FIELDS,
    ATTACHMENTS_OUT,
    EVENTS_RESPONSE,
    JSON,
    MESSAGE_COMPLETED,
    STREAM_EVENT,
    STREAM_RESPONSE,
)
from adapters.websocket.protocol import MAX_ATTACHMENTS, MAX_ID_CHARS, MAX_USER_ID_CHARS

MULTIPART: Final = "multipart/form-data"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {JSON: {"schema": schema}}}


def _errors(*statuses: int) -> dict[str, Any]:
    return {str(status): {"$ref": f"#/components/responses/E{status}"} for status in statuses}


_ANSWER = {
    "description": (
        "The answer's events as a stream; or, when the request's Accept names "
        "application/json and not text/event-stream, just the answer's message.completed frame."
    ),
    "content": {
        **STREAM_RESPONSE["content"],
        JSON: {"schema": {"$ref": "#/components/schemas/MessageCompleted"}},
    },
}
_SESSION_ID = {
    "name": "session_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": "^s_[0-9a-f]{32}$"},
}
_LAST_EVENT_ID = {
    "name": "Last-Event-ID",
    "in": "header",
    "required": False,
    "description": "The id of the last event seen: only later events are sent.",
    "schema": {"type": "string", "pattern": "^[0-9]{1,15}$"},
}
_ACCEPT_LANGUAGE = {
    "name": "Accept-Language",
    "in": "header",
    "required": False,
    "description": (
        "The language of the gateway's own texts in this session (a refusal, the stop note), "
        "kept for the session; the answer's language is the model's."
    ),
    "schema": {"type": "string", "maxLength": 256},
}


def _cursor(name: str, description: str, least: int = 0, most: int = 2**53) -> dict[str, Any]:
    schema = {"type": "integer", "minimum": least, "maximum": most}
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": schema,
    }


def _post(
    summary: str,
    body: str,
    responses: dict[str, Any],
    *,
    optional: bool = False,
    last_event_id: bool = False,
) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "summary": summary,
        "requestBody": {"required": not optional, "content": {JSON: {"schema": _ref(body)}}},
        "responses": responses,
    }
    operation["parameters"] = [_ACCEPT_LANGUAGE, *([_LAST_EVENT_ID] if last_event_id else [])]
    return operation


def document(max_text_chars: int = 8000) -> dict[str, Any]:
    text = {"type": "string", "minLength": 1, "maxLength": max_text_chars, "pattern": "\\S"}
    # optional fields may be null, which means absent (as in the web socket protocol)
    client_id = {"type": ["string", "null"], "minLength": 1, "maxLength": MAX_ID_CHARS}
    short = {"type": ["string", "null"], "minLength": 1, "maxLength": MAX_ID_CHARS}
    session = {
        "type": "object",
        "required": ["id", "user_id", "created_at"],
        "properties": {
            "id": {"type": "string"},
            "user_id": {"type": ["string", "null"]},
            "created_at": {"type": "string"},
        },
    }
    message = {
        "type": "object",
        "required": ["id", "role", "text", "status", "position"],
        "properties": {
            "id": {"type": "string"},
            "role": {"enum": ["user", "assistant"]},
            "text": {"type": "string"},
            "status": {"enum": ["received", "dropped", "pending", "completed", "stopped"]},
            "reply_to": {"type": ["string", "null"]},
            "display": {"type": "array", "items": {"type": "object"}},
            "action": {"type": ["object", "null"]},
            "created_at": {"type": "string"},
            "position": {"type": "integer"},
            "attachments": {
                **ATTACHMENTS_OUT,
                "description": "The files the message came or went out with, each with a "
                "signed `url` made when the history is read, which expires (fetch it soon).",
            },
        },
    }
    error = {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
            }
        },
    }
    why = {
        400: "Malformed request",
        401: "No valid API key",
        404: "No such session for this key",
        409: (
            "A client id in use by a bot message (`conflict`), or, JSON answers only, a message "
            "a stop dropped from the queue (`dropped`: send it with a new client id)"
        ),
        413: "Body too large",
        415: "Body is not JSON",
        429: (
            "Rate limited (`rate_limited`, see Retry-After), this key has max_streams_per_key"
            " streams open (`too_many_streams`, see Retry-After), or the session already has its "
            "limit of messages waiting for an answer (`queue_full`, 100: this one was not "
            "taken; send it again, the same client id is fine, once the bot has answered)"
        ),
        405: "The path does not take this method (Allow names those it takes)",
        500: "The server failed on this request (it is logged); try again",
        503: (
            "The server is stopping (`shutting_down`, JSON answers only), has max_streams"
            " streams open (`server_busy`, see Retry-After), or cannot take anything just now"
            " (`try_later`: its Redis is unreachable; nothing was answered: send the same"
            " request again after Retry-After seconds)"
        ),
        504: "No answer within stream_timeout_s (JSON answers only)",
    }
    responses = {f"E{status}": _json(_ref("Error"), text_) for status, text_ in why.items()}
    responses["E503"]["headers"] = {
        "Retry-After": {
            "description": "Seconds to wait before sending again (with `try_later`)",
            "schema": {"type": "integer", "minimum": 1},
        }
    }
    one = "/sessions/{session_id}"
    paths: dict[str, Any] = {
        "/sessions": {
            "post": _post(
                "Create a session, owned by the calling key",
                "NewSession",
                {"201": _json(_ref("Session"), "Created"), **_errors(400, 401, 413, 415)},
                optional=True,
            )
        },
        one: {
            "parameters": [_SESSION_ID],
            "get": {
                "summary": "A session",
                "responses": {"200": _json(_ref("Session"), "The session"), **_errors(401, 404)},
            },
        },
        f"{one}/messages": {
            "parameters": [_SESSION_ID],
            "get": {
                "summary": "The transcript, a page at a time (oldest first within a page)",
                "parameters": [
                    _cursor("limit", "Messages per page (default 50)", 1, 100),
                    _cursor("before", "Only messages with a smaller position (older pages)"),
                    _cursor("after", "Only messages with a larger position (newer pages)"),
                ],
                "responses": {
                    "200": _json(_ref("MessagePage"), "A page"),
                    **_errors(400, 401, 404),
                },
            },
            "post": _post(
                "Send a message; the answer streams back",
                "NewMessage",
                {"200": _ANSWER, **_errors(400, 401, 404, 409, 413, 415, 429, 503, 504)},
                last_event_id=True,
            ),
        },
        f"{one}/events": {
            "parameters": [_SESSION_ID],
            "get": {
                "summary": "Follow the session's events (EventSource-compatible)",
                "parameters": [_LAST_EVENT_ID],
                "responses": {"200": EVENTS_RESPONSE, **_errors(400, 401, 404, 429, 503)},
            },
        },
        f"{one}/stop": {
            "parameters": [_SESSION_ID],
            "post": _post(
                "Stop the answer in progress, its work (model call, tools, specialists) and "
                "the messages queued behind it; the answer's message.completed then carries "
                "stopped: true and keeps the text it had shown",
                "Stop",
                {
                    "202": _json({"type": "object"}, "Stop requested"),
                    **_errors(400, 401, 404, 413, 415, 429, 503),
                },
                optional=True,
            ),
        },
        f"{one}/files": {
            "parameters": [_SESSION_ID],
            "post": {
                "summary": (
                    "Upload a file for the session's next message (multipart, field `file`); "
                    "send the answer's `attachment` in that message's `attachments`"
                ),
                "requestBody": {
                    "required": True,
                    "content": {
                        MULTIPART: {
                            "schema": {
                                "type": "object",
                                "required": ["file"],
                                "properties": {"file": {"type": "string", "format": "binary"}},
                            }
                        }
                    },
                },
                "responses": {
                    "201": _json(_ref("Uploaded"), "Kept; attach it to a message"),
                    **_errors(400, 401, 404, 413, 415, 429),
                },
            },
        },
        f"{one}/actions": {
            "parameters": [_SESSION_ID],
            "post": _post(
                "Press a button of a display hint; the answer streams back",
                "NewAction",
                {"200": _ANSWER, **_errors(400, 401, 404, 409, 413, 415, 429, 503, 504)},
                last_event_id=True,
            ),
        },
    }
    for item in paths.values():  # any request may meet these
        for method, operation in item.items():
            if method != "parameters":
                operation["responses"].update(_errors(405, 500))
    return {
        "openapi": "3.1.0",
        "info": {"title": "Chat gateway sessions API", "version": "1"},
        "servers": [{"url": "/api/v1"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "responses": responses,
            "schemas": {
                "NewSession": {
                    "type": "object",
                    "properties": {
                        "user_id": {
                            "type": ["string", "null"],
                            "minLength": 1,
                            "maxLength": MAX_USER_ID_CHARS,
                            "pattern": "\\S",
                        }
                    },
                },
                "Session": session,
                "NewMessage": {
                    "type": "object",
                    "description": "`text`, `attachments` or both",
                    "anyOf": [{"required": ["text"]}, {"required": ["attachments"]}],
                    "properties": {
                        "text": text,
                        "client_message_id": client_id,
                        "attachments": {
                            "type": ["array", "null"],  # null: none, as the server reads it
                            "maxItems": MAX_ATTACHMENTS,
                            "items": _ref("Attachment"),
                        },
                    },
                },
                "Attachment": {
                    "type": "object",
                    "description": "A file as the upload answered it, sent back unchanged",
                    "required": ["type", "blob_id", "mime_type", "size", "ref"],
                    "properties": {**ATTACHMENT_FIELDS, "ref": {"type": "string"}},
                },
                "Uploaded": {
                    "type": "object",
                    "required": ["attachment"],
                    "properties": {"attachment": _ref("Attachment")},
                },
                "NewAction": {
                    "type": "object",
                    "required": ["action_id"],
                    "properties": {
                        "action_id": {**short, "type": "string"},
                        "value": {"type": ["string", "null"], "maxLength": max_text_chars},
                        "label": short,
                        "message_id": short,
                        "client_message_id": client_id,
                    },
                },
                "Stop": {"type": "object"},
                "Message": message,
                "MessagePage": {
                    "type": "object",
                    "required": ["messages", "has_more"],
                    "properties": {
                        "messages": {"type": "array", "items": _ref("Message")},
                        "has_more": {"type": "boolean"},
                    },
                },
                "Error": error,
                "MessageCompleted": MESSAGE_COMPLETED,
                "StreamEvent": STREAM_EVENT,
            },
        },
    }
