"""Guest mode (Bot API 10.0, `channels.telegram.guest_mode`): summoned by its @username in a
chat it is not a member of, the bot answers once, with one text message, through
`answerGuestQuery`, within a time box.

Each summon is a conversation of its own, `guest:<query id>`: the summoning chat's id may equal
one of the bot's own chats' and still be another chat, and nothing can be sent there but the one
answer. Such a chat cannot be edited, so the delivery sends only the final; its first message is
the answer (a guest answer is one message: what follows is dropped, and logged). The turn runs
as any other. Telegram gives a summon only a short while (not documented; long tool runs are
reported to miss it), so one not answered within `answer_within_s` is answered with a pointer to
the bot's private chat, and the late answer is dropped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import replace

from aiogram import Bot
from aiogram.enums import ParseMode
from aiogram.types import InlineQueryResultArticle, InputTextMessageContent, Message

from adapters.base import ChatRef, InboundMessage, Inbox, MessageHandle
from adapters.telegram.normalize import BotIdentity, Unsupported, normalize
from adapters.telegram.recent import Recent
from adapters.telegram.render import to_html, visible_text
from content.texts import t

log = logging.getLogger(__name__)

GUEST = "guest:"  # starts a summon's chat id
ANSWER_WITHIN_S = 20.0
REMEMBERED = 4096  # summons answered
TITLE_CHARS = 64

# one Bot API call to the chat inside its budget, its errors as `ChannelError`s
Call = Callable[[ChatRef], AbstractAsyncContextManager[None]]


def is_guest(chat: ChatRef) -> bool:
    return chat.chat_id.startswith(GUEST)


class Guests:
    def __init__(
        self, bot: Bot, name: str, call: Call, *, answer_within_s: float = ANSWER_WITHIN_S
    ) -> None:
        self._bot = bot
        self._name = name  # the channel instance's
        self._call = call
        self._within_s = answer_within_s
        self._answered: Recent[str, None] = Recent(REMEMBERED)  # query ids
        self._boxes: dict[str, asyncio.Task[None]] = {}  # query id -> its time box

    async def summoned(
        self,
        message: Message,
        update_id: int,
        me: BotIdentity,
        inbox: Inbox,
        group: asyncio.TaskGroup | None,
    ) -> None:
        """A guest message: handed on as a message in the summon's own chat, its time box set."""
        query = message.guest_query_id
        inbound = normalize(message, update_id, me, self._name)
        if not query or inbound is None or isinstance(inbound, Unsupported):
            return  # nothing we can read: the summon lapses unanswered
        guest = replace(inbound, chat=ChatRef(self._name, f"{GUEST}{query}"), mentioned=True)
        await inbox(guest)
        if group is not None and query not in self._answered and query not in self._boxes:
            self._boxes[query] = group.create_task(self._time_box(guest, me.username))

    async def answer(self, chat: ChatRef, text: str) -> MessageHandle:
        """The summon's one answer, `text` in markdown; a later one is dropped."""
        query = chat.chat_id.removeprefix(GUEST)
        if query in self._answered:
            log.info("Telegram guest query %s answered already; dropping more", query)
        else:
            await self._answer(chat, query, to_html(text))
        return MessageHandle(chat, query)

    async def _answer(self, chat: ChatRef, query: str, html: str) -> None:
        box = self._boxes.pop(query, None)
        if box is not None and box is not asyncio.current_task():
            box.cancel()
        # before the call: its fate may be unknown, and a guest answer is never sent twice
        self._answered.put(query, None)
        shown = InputTextMessageContent(message_text=html, parse_mode=ParseMode.HTML)
        title = visible_text(html)[:TITLE_CHARS].strip() or "…"
        result = InlineQueryResultArticle(id=query[:64], title=title, input_message_content=shown)
        async with self._call(chat):
            await self._bot.answer_guest_query(guest_query_id=query, result=result)

    async def _time_box(self, message: InboundMessage, username: str) -> None:
        await asyncio.sleep(self._within_s)
        query = message.chat.chat_id.removeprefix(GUEST)
        if query in self._answered:
            return
        log.info("Telegram guest query %s not answered in %.0f s", query, self._within_s)
        note = t(message.language, "guest.private", link=f"https://t.me/{username}")
        try:
            await self._answer(message.chat, query, to_html(note))
        except Exception as exc:  # a courtesy: it must not take the ingress TaskGroup down
            log.warning("Telegram guest query %s: the pointer failed: %s", query, exc)
        finally:
            self._boxes.pop(query, None)
