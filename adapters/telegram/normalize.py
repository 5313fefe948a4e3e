"""A Telegram message as an `InboundMessage`: chat and forum topic, sender, mention, attachments."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from aiogram.types import Message, MessageEntity, MessageGenerationStopped

from adapters.base import Attachment, ChatRef, InboundMessage
from adapters.telegram.media import GET_FILE_LIMIT, photo_within
from content.texts import t

log = logging.getLogger(__name__)

CHANNEL = "telegram"
GROUP_TYPES = frozenset({"group", "supergroup"})
OWN_COMMANDS = frozenset({"new", "stop", "help", "start"})  # a bare /new in a group is for us

# What people send that we cannot read yet, and the text key of how the reply names it.
# Service messages (joins, pins, topic edits ...) are not in here: they are ignored without a word.
UNSUPPORTED = {
    kind: f"unsupported.kind.{kind}"
    for kind in (
        "sticker",
        "animation",
        "location",
        "contact",
        "poll",
        "dice",
        "game",
        "story",
        "live_photo",
        "paid_media",
        "checklist",
        "invoice",
    )
} | {"venue": "unsupported.kind.location"}


@dataclass(frozen=True, slots=True)
class BotIdentity:
    id: int
    username: str


@dataclass(frozen=True, slots=True)
class Unsupported:
    """A message we cannot read, addressed to us: it gets a short reply naming what we can read.

    `message` is it normalized (without text), for the access policy to judge.
    """

    message: InboundMessage
    what: str  # the text key naming it (`unsupported.kind.sticker`)

    @property
    def reply(self) -> str:
        """In the sender's language where Telegram tells one we have texts for, else English
        (the gateway's own choice is not known here)."""
        language = self.message.language
        return t(language, "unsupported.telegram", what=t(language, self.what))


def normalize(
    message: Message, update_id: int, me: BotIdentity, channel: str = CHANNEL
) -> InboundMessage | Unsupported | None:
    """`channel` is the instance's name (`channels.telegram[].id`): it starts the conversation
    key and the event id, so two bots' chats and update ids never meet. None for what is not for us: service messages, other bots, a channel's own posts, and a
    command addressed to another bot (`/new@other`), even in a reply to us or with
    `group_reply: all`."""
    sender = message.from_user
    if sender is None or (sender.is_bot and message.sender_chat is None):
        return None  # channel posts have no sender; other bots would talk to us in loops
    thread = str(message.message_thread_id) if message.is_topic_message else None
    chat = ChatRef(channel, str(message.chat.id), thread)
    is_group = message.chat.type in GROUP_TYPES
    text = message.text if message.text is not None else message.caption or ""
    entities = message.entities or message.caption_entities or []
    command = _leading_command(text, entities)
    if command is not None and command[1] and command[1] != me.username.lower():
        return None
    addressed = not is_group or _addressed(message, text, entities, me)
    kind = getattr(message.content_type, "value", message.content_type)
    attachments = _attachments(message)
    unreadable = not attachments and message.text is None
    if unreadable and (kind not in UNSUPPORTED or not addressed):
        return None
    if message.sender_chat is not None:  # an anonymous admin, or a linked channel, speaking
        user_id, user_name = str(message.sender_chat.id), message.sender_chat.title
    else:
        user_id, user_name = str(sender.id), sender.username or sender.full_name
    inbound = InboundMessage(
        chat=chat,
        user_id=user_id,
        text=_start_is_help(text, me),
        event_id=f"{channel}:{update_id}",
        message_id=str(message.message_id),
        user_name=user_name,
        is_group=is_group,
        mentioned=addressed,
        attachments=attachments,
        bot_name=me.username,
        # the sender's app language (an IETF tag, `de`, `pt-br`); none for an anonymous admin
        language=sender.language_code if message.sender_chat is None else None,
        raw={"update_id": update_id, "message": message.model_dump(mode="json", exclude_none=True)},
    )
    return Unsupported(inbound, UNSUPPORTED[kind]) if unreadable else inbound


def _addressed(message: Message, text: str, entities: list[MessageEntity], me: BotIdentity) -> bool:
    """A mention of @us, a text_mention of us, a reply to one of our messages, or our command."""
    reply = message.reply_to_message
    if reply is not None and reply.from_user is not None and reply.from_user.id == me.id:
        return True
    handle = "@" + me.username.lower()
    for entity in entities:
        if entity.type == "mention" and entity.extract_from(text).lower() == handle:
            return True
        if entity.type == "text_mention" and entity.user is not None and entity.user.id == me.id:
            return True
    command = _leading_command(text, entities)
    return command is not None and (
        command[1] == me.username.lower() or (not command[1] and command[0] in OWN_COMMANDS)
    )


def _leading_command(text: str, entities: list[MessageEntity]) -> tuple[str, str] | None:
    """`/new@Some_Bot …` → ("new", "some_bot"); the bot is "" when none is named.

    From Telegram's bot_command entity, not the text: "/home/me@host" is no command to a bot."""
    for entity in entities:
        if entity.type == "bot_command" and entity.offset == 0:
            command, _, target = entity.extract_from(text)[1:].partition("@")
            return command.lower(), target.lower()
    return None


def _attachments(message: Message) -> tuple[Attachment, ...]:
    if message.photo:
        sizes = [(s.file_id, s.width, s.height, s.file_size) for s in message.photo]
        return (photo_within(sizes, GET_FILE_LIMIT),)
    for kind in ("document", "voice", "audio", "video", "video_note"):
        media = getattr(message, kind)
        if media is not None:
            return (
                Attachment(
                    "video note" if kind == "video_note" else kind,  # spoken: transcribed
                    name=getattr(media, "file_name", None) or getattr(media, "title", None),
                    # a video note declares no type: it is always an MP4
                    mime_type=getattr(media, "mime_type", None)
                    or ("video/mp4" if kind == "video_note" else None),
                    size=media.file_size,
                    platform_id=media.file_id,
                ),
            )
    return ()


def _start_is_help(text: str, me: BotIdentity) -> str:
    """Telegram sends /start when someone first opens the bot: greet them with the help."""
    word = text.split(maxsplit=1)[0] if text.strip() else ""
    if word.lower() in ("/start", f"/start@{me.username.lower()}"):
        return "/help"
    return text


def stop_press(
    stopped: MessageGenerationStopped, update_id: int, me: BotIdentity, channel: str = CHANNEL
) -> InboundMessage:
    """The stop button of a draft pressed: the `/stop` command from the user of that private
    chat (drafts go to users only, and a user's chat with the bot has the user's id), in its
    topic if it has one."""
    chat_id = str(stopped.chat.id)
    thread = str(stopped.message_thread_id) if stopped.message_thread_id else None
    return InboundMessage(
        chat=ChatRef(channel, chat_id, thread),
        user_id=chat_id,
        text="/stop",
        event_id=f"{channel}:{update_id}",
        user_name=stopped.chat.username or stopped.chat.full_name,
        mentioned=True,
        bot_name=me.username,
        raw={
            "update_id": update_id,
            "stopped_message_generation": stopped.model_dump(mode="json", exclude_none=True),
        },
    )
