"""The sessions API's streams in its OpenAPI document: what an SSE body is, and each event's data.

Every event a stream carries (its `data`) is typed, so a client generated from the document, and
a validator, can read each event by its `type`. OpenAPI 3.1 has no schema for the items of a
text/event-stream body: the body is a string whose `data:` lines are `StreamEvent` JSON objects
(`x-event-data` names the schema, as OpenAPI 3.2's `itemSchema` would).
"""

from __future__ import annotations

from typing import Any, Final

JSON: Final = "application/json"
SSE: Final = "text/event-stream"
ATTACHMENT_FIELDS: dict[str, Any] = {
    "type": {"enum": ["image", "file", "audio"]},
    "blob_id": {"type": "string", "minLength": 1},
    "mime_type": {"type": "string", "pattern": "/"},
    "size": {"type": "integer", "minimum": 0},
    "name": {"type": "string"},
}
ATTACHMENTS_OUT = {
    "type": "array",
    "description": "The answer's files: each with a signed `url` that expires (fetch it soon).",
    "items": {
        "type": "object",
        "required": ["type", "blob_id", "mime_type", "size", "url"],
        "properties": {**ATTACHMENT_FIELDS, "url": {"type": "string"}},
    },
}


_EVENT_TYPES: Final = (
    "message.created",
    "message.updated",
    "message.completed",
    "message.dropped",
    "agent.started",
    "agent.finished",
    "tool.started",
    "tool.finished",
    "handoff.updated",
    "error",
)
SSE_BODY: dict[str, Any] = {
    "schema": {
        "type": "string",
        "contentMediaType": SSE,
        "description": (
            "Server-Sent Events: each is `id: <seq>` (none on `error`), `event: <type>`, "
            "`data: <a StreamEvent as JSON>`, then a blank line; `:` lines are keep-alives."
        ),
    },
    "x-event-data": {"$ref": "#/components/schemas/StreamEvent"},
}
_FRAMES = (
    "the web socket protocol's server frames: message.created, message.updated, "
    "message.completed, agent.started, agent.finished, tool.started, tool.finished, "
    "handoff.updated (the StreamEvent schema), each `id: <seq>`, `event: <type>`, `data: <the frame as JSON>`"
)
STREAM_RESPONSE: dict[str, Any] = {
    "description": (
        f"Server-Sent Events: the answer's events ({_FRAMES}), until the answer's "
        "message.completed. A message that a stop dropped from the "
        "queue before the bot took it ends instead with `message.dropped` ({type, message_id: "
        "the client's id, reason: 'stopped', seq}); a resend of it (same client_message_id) gets "
        "that event again at once and is not answered: send it with a new id to have it "
        "answered. An `error` event (no id) ends a stream that timed out or fell behind."
    ),
    "content": {SSE: SSE_BODY},
}
EVENTS_RESPONSE: dict[str, Any] = {
    "description": (
        f"Server-Sent Events: every event of the session ({_FRAMES}, and message.dropped), "
        "from now, or after Last-Event-ID, of every answer in turn: the stream does **not** end "
        "at a message.completed. After stream_timeout_s it just ends (EventSource reconnects; "
        "send Last-Event-ID to go on without a gap); it ends with an `error` event (no id) "
        "when the client fell behind, and when the server stops."
    ),
    "content": {SSE: SSE_BODY},
}
MESSAGE_COMPLETED = {
    "type": "object",
    "required": ["type", "message_id", "text", "display", "seq"],
    "properties": {
        "type": {"const": "message.completed"},
        "message_id": {"type": "string"},
        "text": {"type": "string"},
        "display": {"type": "array", "items": {"type": "object"}},
        "attachments": ATTACHMENTS_OUT,
        "stopped": {
            "type": "boolean",
            "description": (
                "true: the answer was stopped; `text` keeps what it had shown, its last "
                "paragraph the stop mark ('⏹ Stopped.' in the conversation's language)"
            ),
        },
        "seq": {"type": "integer"},
    },
}
STREAM_EVENT = {
    "type": "object",
    "description": (
        "One event's data: a frame of the web socket protocol (docs/websocket-protocol.md), "
        "by `type`; fields beyond these may be added, never renamed."
    ),
    "required": ["type"],
    "properties": {
        "type": {"enum": list(_EVENT_TYPES)},
        "seq": {"type": "integer", "description": "absent on `error`"},
        "message_id": {"type": "string"},
        "reply_to": {"type": ["string", "null"]},
        "text": {"type": "string"},
        "display": {"type": "array", "items": {"type": "object"}},
        "attachments": ATTACHMENTS_OUT,
        "stopped": {"type": "boolean", "description": "on message.completed: it was stopped"},
        "reason": {"type": "string"},
        "task_id": {"type": "string"},
        "subagent_type": {"type": "string"},
        "display_name": {"type": "string"},
        "description": {"type": "string"},
        "status": {"type": "string"},
        "call_id": {"type": "string"},
        "name": {"type": "string"},
        "label": {"type": "string"},
        "code": {"type": "string"},
        "message": {"type": "string"},
        "handoff_id": {"type": "string"},
        "mode": {"enum": ["waiting", "human", "bot"]},
        "operator": {"type": ["string", "null"]},
    },
    "oneOf": [
        {
            "properties": {"type": {"const": "message.completed"}},
            **{"required": ["message_id", "text", "display", "seq"]},
        },
        {
            "properties": {"type": {"enum": ["message.created", "message.updated"]}},
            "required": ["message_id", "text", "seq"],
        },
        {
            "properties": {"type": {"const": "message.dropped"}},
            "required": ["message_id", "reason", "seq"],
        },
        {
            "properties": {"type": {"enum": ["agent.started", "agent.finished"]}},
            "required": ["task_id", "status", "seq"],
        },
        {
            "properties": {"type": {"enum": ["tool.started", "tool.finished"]}},
            "required": ["call_id", "status", "seq"],
        },
        {
            "properties": {"type": {"const": "handoff.updated"}},
            "required": ["handoff_id", "mode", "status", "seq"],
        },
        {"properties": {"type": {"const": "error"}}, "required": ["code", "message"]},
    ],
}
