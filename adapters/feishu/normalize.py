"""Feishu events (schema 2.0 JSON) → `InboundMessage`s.

`im.message.receive_v1`: private chats (p2p) are always addressed to the bot; in a group the
bot must be among the mentions. Mention keys (`@_user_1`) become the person's name, and the
bot's own mention is dropped. A message in a thread keeps to that thread's conversation. Text
and post (rich text) are read, images, files, audio and video (and the images inside a post)
become attachments fetched through the message-resource API; other kinds become `Unsupported`
with a short honest reply.
`card.action.trigger` (a button press) becomes an action on the conversation its button named;
the stop button of a running turn's card becomes the text "/stop" from the presser, taken in a
private chat from anyone (there is only the user), in a group only from the user the turn
answers (the button's value names them): another member's press is ignored.

The claim key for the gateway's dedup is the message id (Feishu redelivers an event with the
same message id, for about seven hours, and the same message may arrive by two routes); for a
button press it is the event id.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adapters.base import Action, Attachment, ChatRef, InboundMessage
from adapters.feishu.live_card import STOP_ACTION
from content.texts import t

log = logging.getLogger(__name__)

CHANNEL = "feishu"
MESSAGE = "im.message.receive_v1"
CARD_ACTION = "card.action.trigger"
UNSUPPORTED = "unsupported.text_only"  # the reply's text key (content/locales/)
# message type -> the attachment kind it carries (its key: `image_key`, else `file_key`)
FILE_KINDS = {"image": "photo", "file": "file", "audio": "audio", "media": "video"}
_KINDS = {
    "sticker": "unsupported.kind.sticker",
    "interactive": "unsupported.kind.card",
    "share_chat": "unsupported.kind.shared_chat",
}
_SPACES = re.compile(r"[ \t]{2,}")


@dataclass(frozen=True, slots=True)
class Unsupported:
    message: InboundMessage
    reply: str


def normalize(
    payload: Mapping[str, Any], bot_open_id: str, channel: str = CHANNEL
) -> InboundMessage | Unsupported | None:
    """`channel` is the instance's name (`channels.feishu[].id`): a Feishu and a Lark app side
    by side keep their conversations and event ids apart."""
    header = payload.get("header") or {}
    event = payload.get("event") or {}
    kind = header.get("event_type")
    if kind == MESSAGE:
        return _message(event, bot_open_id, payload, channel)
    if kind == CARD_ACTION:
        return _action(event, str(header.get("event_id", "")), payload, channel)
    return None


def _message(
    event: Mapping[str, Any], bot_open_id: str, raw: Mapping[str, Any], channel: str
) -> InboundMessage | Unsupported | None:
    sender = event.get("sender") or {}
    message = event.get("message") or {}
    if sender.get("sender_type") != "user" or not message.get("message_id"):
        return None  # our own messages and other bots'
    user_id = (sender.get("sender_id") or {}).get("open_id") or ""
    is_group = message.get("chat_type") != "p2p"
    mentions = message.get("mentions") or []
    ours = [m for m in mentions if _is_bot(m, bot_open_id)]
    chat = ChatRef(channel, str(message.get("chat_id", "")), message.get("thread_id") or None)
    message_id = str(message["message_id"])
    kind = message.get("message_type")
    body = _body(message.get("content") or "{}")
    text = _text(kind, body)
    attachments = _attachments(kind, body)
    if attachments and text is None:
        text = ""
    inbound = InboundMessage(
        chat=chat,
        user_id=user_id,
        text="" if text is None else _resolve(text, mentions, ours),
        event_id=f"{channel}:{message_id}",
        message_id=message_id,
        is_group=is_group,
        mentioned=not is_group or bool(ours),
        attachments=attachments,
        raw=raw,
    )
    if text is None:
        # Feishu's message events tell no user locale: in English until one is known
        language = inbound.language
        key = _KINDS.get(str(kind))
        what = t(language, key) if key else t(language, "unsupported.any_kind", kind=kind)
        return Unsupported(inbound, t(language, UNSUPPORTED, what=what))
    return inbound


def _is_bot(mention: Mapping[str, Any], bot_open_id: str) -> bool:
    open_id = (mention.get("id") or {}).get("open_id")
    # Without the bot's id (its info could not be fetched) a mention is taken to be ours: in a
    # group the platform only delivers messages that mention the bot, unless the app may read all.
    return open_id == bot_open_id if bot_open_id else True


def _body(content: str) -> Mapping[str, Any] | None:
    try:
        body = json.loads(content)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _text(kind: Any, body: Mapping[str, Any] | None) -> str | None:
    if body is None:
        return None
    if kind == "text":
        return str(body.get("text", ""))
    if kind == "post":
        return _post_text(body)
    return None


def _attachments(kind: Any, body: Mapping[str, Any] | None) -> tuple[Attachment, ...]:
    """The files a message carries: its own (image, file, audio, video) or a post's images."""
    if body is None:
        return ()
    if kind in FILE_KINDS:
        key = body.get("image_key") if kind == "image" else body.get("file_key")
        if not isinstance(key, str) or not key:
            return ()
        name = body.get("file_name")
        return (
            Attachment(
                FILE_KINDS[kind],
                name=name if isinstance(name, str) else None,
                # Feishu records voice as Opus and serves it as octet-stream: say what it is
                mime_type="audio/opus" if kind == "audio" else None,
                platform_id=key,
            ),
        )
    if kind == "post":
        return tuple(
            Attachment("photo", platform_id=str(node["image_key"]))
            for paragraph in _post_body(body).get("content") or []
            for node in paragraph or []
            if node.get("tag") == "img" and node.get("image_key")
        )
    return ()


def _post_body(body: Mapping[str, Any]) -> Mapping[str, Any]:
    """A post sent to us may or may not be wrapped in a locale."""
    if "content" not in body and body:
        return next(iter(v for v in body.values() if isinstance(v, dict)), {})
    return body


def _post_text(body: Mapping[str, Any]) -> str:
    """A post's paragraphs as lines."""
    body = _post_body(body)
    lines = [str(body["title"])] if body.get("title") else []
    for paragraph in body.get("content") or []:
        parts = []
        for node in paragraph or []:
            tag = node.get("tag")
            if tag in ("text", "md"):
                parts.append(str(node.get("text", "")))
            elif tag == "a":
                label, href = node.get("text") or "", node.get("href") or ""
                parts.append(f"[{label}]({href})" if label and href else label or href)
            elif tag == "at":
                parts.append(str(node.get("user_id", "")))  # a mention key, resolved below
            elif tag == "code_block":
                parts.append(f"```{node.get('language', '')}\n{node.get('text', '')}\n```")
        lines.append("".join(parts))
    return "\n".join(lines)


def _resolve(text: str, mentions: list[Mapping[str, Any]], ours: list[Mapping[str, Any]]) -> str:
    for mention in sorted(mentions, key=lambda m: -len(str(m.get("key", "")))):  # @_user_10 first
        key = str(mention.get("key", ""))
        if key:
            text = text.replace(key, "" if mention in ours else f"@{mention.get('name', '')}")
    return _SPACES.sub(" ", text).strip()


def _action(
    event: Mapping[str, Any], event_id: str, raw: Mapping[str, Any], channel: str
) -> InboundMessage | None:
    action = event.get("action") or {}
    value = action.get("value")
    context = event.get("context") or {}
    chat_id = context.get("open_chat_id")
    if not isinstance(value, dict) or not value.get("action_id") or not chat_id or not event_id:
        return None  # not one of our buttons
    message_id = context.get("open_message_id")
    presser = str((event.get("operator") or {}).get("open_id", ""))
    chat = ChatRef(channel, str(chat_id), value.get("thread") or None)
    stop = value["action_id"] == STOP_ACTION  # the turn card's stop button: the user's /stop
    if stop and value.get("group") == "1" and value.get("by") != presser:
        log.info("Feishu: a stop pressed in %s by someone the turn does not answer", chat.key)
        return None
    action = Action(str(value["action_id"]), value.get("value"), value.get("label"), message_id)
    return InboundMessage(
        chat=chat,
        user_id=presser,
        text="/stop" if stop else "",
        event_id=f"{channel}:event:{event_id}",
        message_id=message_id,
        is_group=value.get("group") == "1",
        mentioned=True,  # pressing the bot's button addresses the bot
        action=None if stop else action,
        raw=raw,
    )
