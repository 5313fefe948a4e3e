"""Slack events as `InboundMessage`s: DMs, mentions and their threads, slash commands, buttons.

A mention in a channel starts a thread under the message; the thread is the conversation, and
replies in it continue it without another mention (after a restart too: ingress.py asks the
store whether the bot answered in a thread it does not remember). A
DM is one conversation, or one per thread where the user threads (the AI-app container does);
under Slack's agent messaging experience (`agent_view`) each top-level DM message is a thread
root, so each is a conversation of its own, answered in its thread. A stop pressed on an agent
session (`agent_session_stopped`) is the user's `/stop` in that thread.
The event id is the message's (`team:channel:ts`), not Slack's `event_id`: Slack sends a
mention both as `message` and as `app_mention`, with different event ids, and retries either;
keyed on the message, the gateway's durable claim answers it once, whichever comes first.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from adapters.base import Action, Attachment, ChatRef, InboundMessage

CHANNEL = "slack"
COMMANDS = frozenset({"new", "stop", "help"})
# A whole message that is a command word: `help`, `/help`, `!help` (Slack's client keeps a
# leading `/` for its own slash commands, so in a DM the bare word is what people type).
_TEXT_COMMAND = re.compile(r"[/!]?(new|stop|help)[.!]?", re.IGNORECASE)
_ANSWERED_SUBTYPES = frozenset({"file_share", "thread_broadcast"})


@dataclass(frozen=True, slots=True)
class BotIdentity:
    user_id: str  # the bot user (`<@U…>` in mentions)
    bot_id: str
    team_id: str


def message(
    event: Mapping[str, Any],
    team_id: str,
    me: BotIdentity,
    in_our_thread: Callable[[str, str], bool],
    channel_name: str = CHANNEL,
    agent_view: bool = False,
) -> InboundMessage | None:
    """A `message` or `app_mention` event; None for what is not a user's new message: edits,
    deletions, joins, and anything from a bot (this one included)."""
    if event.get("subtype") and event.get("subtype") not in _ANSWERED_SUBTYPES:
        return None  # message_changed, message_deleted, bot_message, channel_join ...
    user = event.get("user")
    if not user or event.get("bot_id") or event.get("bot_profile") or user == me.user_id:
        return None
    channel, ts = str(event.get("channel", "")), str(event.get("ts", ""))
    if not channel or not ts:
        return None
    direct = event.get("channel_type") == "im" or channel.startswith("D")
    thread_ts = event.get("thread_ts")
    mention = f"<@{me.user_id}>"
    raw_text = str(event.get("text") or "")
    if direct:
        root = thread_ts or (ts if agent_view else None)
        chat = ChatRef(channel_name, channel, root, team_id=team_id)
        addressed = True
    else:
        chat = ChatRef(channel_name, channel, thread_ts or ts, team_id=team_id)
        addressed = (
            event.get("type") == "app_mention"
            or mention in raw_text
            or (thread_ts is not None and in_our_thread(channel, thread_ts))
        )
    return InboundMessage(
        chat=chat,
        user_id=str(user),
        text=_command_form(raw_text.replace(mention, " ").strip()),
        event_id=f"{channel_name}:{team_id}:{channel}:{ts}",
        message_id=ts,
        is_group=not direct,
        mentioned=addressed,
        attachments=_files(event.get("files") or ()),
        raw={"event": dict(event)},
    )


def session_stopped(
    event: Mapping[str, Any], team_id: str, channel_name: str = CHANNEL
) -> InboundMessage | None:
    """The stop button of an agent session: `/stop` from its user in its thread. Slack has
    already ended the streams it lists (`streaming_message_ts`)."""
    channel, thread_ts, user = event.get("channel"), event.get("thread_ts"), event.get("user")
    if not channel or not thread_ts or not user:
        return None
    direct = str(channel).startswith("D")
    chat = ChatRef(channel_name, str(channel), str(thread_ts), team_id=team_id)
    return InboundMessage(
        chat=chat,
        user_id=str(user),
        text="/stop",
        event_id=f"{channel_name}:{team_id}:stopped:{channel}:{thread_ts}:{event.get('event_ts')}",
        is_group=not direct,
        mentioned=True,
        raw={"event": dict(event)},
    )


def command(body: Mapping[str, Any], chat: ChatRef) -> InboundMessage:
    """A slash command (`/assistant new`, or a command named `/new` …) as the gateway's command;
    anything else it is given shows the help, since a slash command has no thread to answer in."""
    name = str(body.get("command", "")).lstrip("/").lower()
    words = str(body.get("text") or "").split()
    word = name if name in COMMANDS else (words[0].lower().lstrip("/") if words else "help")
    text = f"/{word}" if word in COMMANDS else "/help"
    return InboundMessage(
        chat=chat,
        user_id=str(body.get("user_id", "")),
        text=text,
        event_id=f"{chat.channel}:{chat.team_id}:command:{body.get('trigger_id') or body.get('command')}",
        message_id=f"ephemeral:{body.get('user_id', '')}",
        user_name=body.get("user_name"),
        is_group=not chat.chat_id.startswith("D"),
        mentioned=True,
        raw={"command": dict(body)},
    )


def action(
    body: Mapping[str, Any], team_id: str, channel_name: str = CHANNEL
) -> InboundMessage | None:
    """A `block_actions` button press, on the conversation of the message that carried it."""
    actions = body.get("actions") or []
    channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get(
        "channel_id"
    )
    user = (body.get("user") or {}).get("id")
    if not actions or not channel or not user:
        return None
    pressed = actions[0]
    carrier = body.get("message") or {}
    message_ts = carrier.get("ts") or (body.get("container") or {}).get("message_ts")
    thread_ts = carrier.get("thread_ts") or (body.get("container") or {}).get("thread_ts")
    direct = str(channel).startswith("D")
    chat = ChatRef(channel_name, channel, thread_ts if direct else thread_ts or message_ts, team_id)
    label = (pressed.get("text") or {}).get("text")
    return InboundMessage(
        chat=chat,
        user_id=str(user),
        text="",
        event_id=f"{channel_name}:{team_id}:action:{channel}:{message_ts}:{pressed.get('action_ts')}",
        message_id=message_ts,
        user_name=(body.get("user") or {}).get("username"),
        is_group=not direct,
        mentioned=True,
        action=Action(str(pressed.get("action_id", "")), pressed.get("value"), label, message_ts),
        raw={"action": dict(body)},
    )


def _command_form(text: str) -> str:
    match = _TEXT_COMMAND.fullmatch(text)
    return f"/{match.group(1).lower()}" if match else text


def _files(files: Any) -> tuple[Attachment, ...]:
    made = []
    for file in files:
        mime = file.get("mimetype")
        kind = _kind(str(mime or ""), file.get("subtype"))
        made.append(
            Attachment(
                kind,
                name=file.get("name"),
                mime_type=mime,
                size=file.get("size"),
                url=file.get("url_private"),
                platform_id=file.get("id"),
            )
        )
    return tuple(made)


def _kind(mime: str, subtype: object) -> str:
    """An audio clip recorded in Slack (`subtype: slack_audio`, audio/webm or audio/mp4) is a
    voice note, whatever type it is labelled with; any other audio file is audio: both are
    transcribed. A video clip (`slack_video`) stays a file."""
    if subtype == "slack_audio":
        return "voice"
    if mime.startswith("audio/"):
        return "audio"
    return "photo" if mime.startswith("image/") else "file"
