"""What Slack sends an app, for tests: event envelopes, slash commands, button presses, signatures.

Shapes follow Slack's Events API and interactivity payloads (platforms.md §2.3, §2.4).
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
from typing import Any
from urllib.parse import urlencode

TEAM = "T1"
BOT_USER = "UBOT"
BOT_ID = "BBOT"
USER = "U1"
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"

_clock = itertools.count(1)


def new_ts() -> str:
    """A fresh message ts, unique in the run, like Slack's."""
    return f"{int(time.time())}.{next(_clock):06d}"


def message(
    text: str,
    *,
    channel: str = "C1",
    user: str = USER,
    ts: str | None = None,
    thread_ts: str | None = None,
    kind: str = "message",
    **extra: Any,
) -> dict[str, Any]:
    """A `message` (or `app_mention`) event from `user`; a `D…` channel is a DM."""
    event: dict[str, Any] = {
        "type": kind,
        "channel": channel,
        "user": user,
        "text": text,
        "ts": ts or new_ts(),
        "event_ts": ts or new_ts(),
    }
    if kind == "message":
        event["channel_type"] = "im" if channel.startswith("D") else "channel"
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event | extra


def envelope(event: dict[str, Any], *, event_id: str | None = None) -> dict[str, Any]:
    """The `event_callback` body an event arrives in."""
    return {
        "token": "legacy-verification-token",
        "team_id": TEAM,
        "api_app_id": "A1",
        "type": "event_callback",
        "event_id": event_id or f"Ev{next(_clock):08d}",
        "event_time": int(time.time()),
        "authorizations": [
            {"team_id": TEAM, "user_id": BOT_USER, "is_bot": True, "is_enterprise_install": False}
        ],
        "event": event,
    }


def slash_command(
    command: str, text: str = "", *, channel: str = "C1", user: str = USER
) -> dict[str, str]:
    return {
        "token": "legacy-verification-token",
        "team_id": TEAM,
        "team_domain": "example",
        "channel_id": channel,
        "channel_name": "directmessage" if channel.startswith("D") else "general",
        "user_id": user,
        "user_name": "alice",
        "command": command,
        "text": text,
        "api_app_id": "A1",
        "response_url": "https://hooks.slack.invalid/commands/1",
        "trigger_id": f"{next(_clock)}.trigger",
    }


def button_press(
    action_id: str, *, value: str, label: str, channel: str, message_ts: str, thread_ts: str | None
) -> dict[str, Any]:
    carrier: dict[str, Any] = {
        "type": "message",
        "ts": message_ts,
        "user": BOT_USER,
        "bot_id": BOT_ID,
    }
    if thread_ts:
        carrier["thread_ts"] = thread_ts
    return {
        "type": "block_actions",
        "team": {"id": TEAM, "domain": "example"},
        "user": {"id": USER, "username": "alice", "team_id": TEAM},
        "api_app_id": "A1",
        "container": {"type": "message", "message_ts": message_ts, "channel_id": channel},
        "channel": {"id": channel, "name": "general"},
        "message": carrier,
        "trigger_id": f"{next(_clock)}.trigger",
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": "hint-0",
                "value": value,
                "text": {"type": "plain_text", "text": label},
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }


def signed_headers(body: str, *, secret: str = SECRET, at: float | None = None) -> dict[str, str]:
    """The headers Slack signs an HTTP request with: v0=HMAC-SHA256 over `v0:{ts}:{body}`."""
    timestamp = str(int(at if at is not None else time.time()))
    digest = hmac.new(secret.encode(), f"v0:{timestamp}:{body}".encode(), hashlib.sha256)
    return {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": f"v0={digest.hexdigest()}"}


def json_body(payload: dict[str, Any]) -> tuple[str, str]:
    return json.dumps(payload), "application/json"


def form_body(fields: dict[str, str]) -> tuple[str, str]:
    return urlencode(fields), "application/x-www-form-urlencoded"


def interactive_body(payload: dict[str, Any]) -> tuple[str, str]:
    return urlencode({"payload": json.dumps(payload)}), "application/x-www-form-urlencoded"
