"""The fake Slack's native streams: chat.startStream, chat.appendStream, chat.stopStream.

Their wire format and rules as Slack documents them (docs.slack.dev/reference/methods/chat.*Stream)
and as people measured them: a stream is a reply in a thread (`thread_ts` required); outside a DM
it needs `recipient_user_id` and `recipient_team_id` (`missing_recipient_*`); content comes as
`markdown_text` (at most 12,000 characters a call, else `msg_too_long`) or `chunks`
(`markdown_text`, `task_update` with id/title/status pending|in_progress|complete|error,
`plan_update` with a title, `blocks`; anything else is `invalid_chunks`); a task's title and
status replace the earlier ones. Appending to or stopping a message that is not an open stream is
`message_not_in_streaming_state` (a stream Slack ended: after `lifetime_s`, or a user's stop);
an unknown ts is `message_not_found`. `chat.stopStream` takes up to 50 `blocks` shown under the
text. `chat.update` of a message still streaming is refused (`streaming_state_conflict`).
Every chunk is kept in order on the message (`Message.chunks`).
"""

from __future__ import annotations

import json
import time
from typing import Any, Protocol

MAX_MARKDOWN = 12_000
TASK_STATUSES = frozenset({"pending", "in_progress", "complete", "error"})
DISPLAY_MODES = frozenset({"timeline", "plan", "dense"})
STREAM_METHODS = frozenset({"chat.startStream", "chat.appendStream", "chat.stopStream"})


class StreamedMessage(Protocol):
    text: str
    blocks: list[Any] | None
    streaming: bool
    started_at: float
    chunks: list[dict[str, Any]]
    tasks: dict[str, dict[str, Any]]
    plan: str | None


def _listed(value: Any) -> list[Any]:
    return json.loads(value) if isinstance(value, str) else list(value or [])


def content_error(params: dict[str, Any]) -> str | None:
    """What Slack says of a call's content, if it refuses it."""
    markdown = params.get("markdown_text")
    if markdown is not None and len(str(markdown)) > MAX_MARKDOWN:
        return "msg_too_long"
    try:
        chunks = _listed(params.get("chunks"))
    except ValueError:
        return "invalid_chunks"
    for chunk in chunks:
        kind = chunk.get("type") if isinstance(chunk, dict) else None
        if kind == "markdown_text":
            if not isinstance(chunk.get("text"), str):
                return "invalid_chunks"
            if len(chunk["text"]) > MAX_MARKDOWN:
                return "msg_too_long"
        elif kind == "task_update":
            if not chunk.get("id") or not chunk.get("title"):
                return "invalid_chunks"
            if chunk.get("status") not in TASK_STATUSES:
                return "invalid_chunks"
        elif kind == "plan_update":
            if not isinstance(chunk.get("title"), str):
                return "invalid_chunks"
        elif kind != "blocks":
            return "invalid_chunks"
    return None


def start_error(params: dict[str, Any]) -> str | None:
    if not params.get("thread_ts"):
        return "invalid_arguments"  # "Streamed messages should always be replies"
    if not str(params.get("channel", "")).startswith("D"):
        if not params.get("recipient_user_id"):
            return "missing_recipient_user_id"
        if not params.get("recipient_team_id"):
            return "missing_recipient_team_id"
    mode = params.get("task_display_mode")
    if mode is not None and mode not in DISPLAY_MODES:
        return "invalid_arguments"
    return content_error(params)


def open_error(message: StreamedMessage | None, lifetime_s: float) -> str | None:
    """Why a message takes no more stream calls, if it does not."""
    if message is None:
        return "message_not_found"
    if message.streaming and time.monotonic() - message.started_at > lifetime_s:
        message.streaming = False  # Slack ends a stream after about five minutes
    return None if message.streaming else "message_not_in_streaming_state"


def apply(message: StreamedMessage, params: dict[str, Any]) -> None:
    """Append a call's content to the message, in order."""
    if params.get("markdown_text"):
        chunk = {"type": "markdown_text", "text": str(params["markdown_text"])}
        message.chunks.append(chunk)
        message.text += chunk["text"]
    for chunk in _listed(params.get("chunks")):
        message.chunks.append(chunk)
        if chunk["type"] == "markdown_text":
            message.text += chunk["text"]
        elif chunk["type"] == "task_update":
            message.tasks[str(chunk["id"])] = {
                "title": chunk["title"],
                "status": chunk["status"],
            }
        elif chunk["type"] == "plan_update":
            message.plan = chunk["title"]


def stop_blocks_error(params: dict[str, Any]) -> str | None:
    try:
        blocks = _listed(params.get("blocks"))
    except ValueError:
        return "invalid_blocks"
    return "invalid_blocks" if len(blocks) > 50 else None
