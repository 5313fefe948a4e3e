"""Live drafts in private chats (`sendMessageDraft`): a turn's placeholder and previews as one
animated draft, its final as one ordinary message.

A draft is ephemeral: the app shows it for about 30 s after its last update and drops it once
the bot posts a message in the chat. So the final is always a `sendMessage` (no draft is left to
expire in place of an answer), and a turn whose work shows nothing new for a while has its draft
sent again (`refresh`, from the "typing…" loop). A draft's handle names the draft and the message
it answers (`data`), so a process taking the turn over goes on with the same draft. Every draft
offers Telegram's stop button (`can_stop`): a press comes back as a `stopped_message_generation`
update (ingress.py); `finished` tells a press that came after the answer apart.

Where Telegram refuses drafts (a server older than Bot API 9.5 answers 404; a chat it will not
draft in, 400), the chat falls back to a placeholder message and edits, and is remembered so.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiogram import Bot
from aiogram.exceptions import TelegramBadRequest, TelegramNotFound

from adapters.base import ChannelError, ChatRef, DeliveryUncertain, MessageHandle, OutboundContent
from adapters.budget import Rank
from adapters.telegram.errors import ParseError, bad_request
from adapters.telegram.recent import Recent
from adapters.telegram.render import to_html

log = logging.getLogger(__name__)

DRAFT = "draft_id"  # the handle's data: the draft it shows
REPLY_TO = "reply_to"  # the handle's data: the message its final answers
REFRESH_S = 20.0  # a draft unchanged this long is sent again (the app drops it after ~30 s)
REMEMBERED = 4096  # chats refused, drafts finished
MAX_DRAFT_ID = 2**31 - 1
FILLER = "⋯"  # what the delivery leaves in a message its final no longer needs

# the final as a new message in the chat (markdown, the message it answers): its handle
Post = Callable[[ChatRef, OutboundContent, str | None], Awaitable[MessageHandle]]
Edit = Callable[..., Awaitable[None]]  # the channel's edit of a message
Request = Callable[[str, str | None], Awaitable[object]]
# the channel's way to make one call: the chat's budget, HTML with a plain-text retry
Deliver = Callable[[ChatRef, str, Rank, Request], Awaitable[object]]


class DraftsRefused(ChannelError):
    """Telegram will not show drafts here (`everywhere`: this server knows no drafts at all)."""

    def __init__(self, message: str, *, everywhere: bool = False) -> None:
        super().__init__(f"Telegram refused a draft: {message}")
        self.everywhere = everywhere


@dataclass(slots=True)
class _Draft:
    chat: ChatRef
    draft_id: int
    rendered: str | None = None  # the HTML last sent
    at: float = 0.0  # when (loop time)


def is_private(chat: ChatRef) -> bool:
    """A user's chat with the bot: user ids are positive, groups' and channels' negative."""
    return chat.chat_id.isdigit()


def draft_of(handle: MessageHandle) -> int | None:
    """The draft a handle shows; None for a message."""
    draft = handle.data.get(DRAFT)
    return int(draft) if draft is not None else None


class Drafts:
    def __init__(
        self, bot: Bot, deliver: Deliver, *, enabled: bool, refresh_s: float = REFRESH_S
    ) -> None:
        self._bot = bot
        self._refresh_s = refresh_s
        self._deliver = deliver
        self.enabled = enabled  # channels.telegram.drafts: auto
        self._refused: Recent[str, None] = Recent(REMEMBERED)  # chat ids
        self._refused_everywhere = False
        self._live: dict[str, list[_Draft]] = {}  # chat key -> drafts showing
        # (chat id, draft id) -> the message its final became (None: its fate is unknown)
        self._finished: Recent[tuple[str, int], MessageHandle | None] = Recent(REMEMBERED)

    def wanted(self, chat: ChatRef) -> bool:
        return (
            self.enabled
            and not self._refused_everywhere
            and is_private(chat)
            and chat.chat_id not in self._refused
        )

    async def open(self, chat: ChatRef, rendered: str, reply_to: str | None) -> MessageHandle:
        """A new draft showing `rendered`; `ChannelError` when it could not be shown (then the
        caller posts a message instead; a refusal is remembered for the chat)."""
        draft = _Draft(chat, secrets.randbelow(MAX_DRAFT_ID) + 1)
        await self._send(draft, rendered, "send")
        self._live.setdefault(chat.key, []).append(draft)
        data: dict[str, Any] = {DRAFT: draft.draft_id, REPLY_TO: reply_to}
        return MessageHandle(chat, f"draft:{draft.draft_id}", data)

    async def update(self, handle: MessageHandle, rendered: str) -> None:
        draft = self._draft(handle)
        if draft.rendered != rendered:
            await self._send(draft, rendered, "preview")

    async def refresh(self, chat: ChatRef) -> bool:
        """Send again the chat's drafts unchanged for `refresh_s`; False when it shows none."""
        drafts = self._live.get(chat.key)
        if not drafts:
            return False
        now = asyncio.get_running_loop().time()
        for draft in list(drafts):
            if draft.rendered is not None and now - draft.at >= self._refresh_s:
                await self._send(draft, draft.rendered, "preview")
        return True

    async def edit(
        self,
        handle: MessageHandle,
        content: OutboundContent,
        final: bool,
        *,
        post: Post,
        edit: Edit,
    ) -> None:
        """A preview updates the draft; the final posts the one message (once: a retried final
        edits it). The delivery closes a message the final needs no more with FILLER: a draft
        needs nothing, it goes when the final message comes."""
        if not final:
            await self.update(handle, to_html(content.text))
            return
        posted, message = self.closing(handle)
        if posted:
            if message is not None:
                await edit(message, content, final=True)
            return
        if content.text == FILLER and content.live is None:
            return
        try:
            message = await post(handle.chat, content, handle.data.get(REPLY_TO))
        except DeliveryUncertain as exc:
            # it may be in the chat: a retried final must not post it twice
            log.warning("the final of a draft in %s may not have landed: %s", handle.chat.key, exc)
            self.posted(handle, None)
            return
        self.posted(handle, message)

    def closing(self, handle: MessageHandle) -> tuple[bool, MessageHandle | None]:
        """A final for the draft: it shows no more. (True, its message) if its final was
        posted already (None: posted with an unknown fate), else (False, None)."""
        draft_id = draft_of(handle)
        assert draft_id is not None
        chat = handle.chat
        drafts = [d for d in self._live.get(chat.key, ()) if d.draft_id != draft_id]
        if drafts:
            self._live[chat.key] = drafts
        else:
            self._live.pop(chat.key, None)
        key = (chat.chat_id, draft_id)
        return key in self._finished, self._finished.get(key)

    def posted(self, handle: MessageHandle, message: MessageHandle | None) -> None:
        """The draft's final went out as `message` (None: it may have)."""
        draft_id = draft_of(handle)
        assert draft_id is not None
        self._finished.put((handle.chat.chat_id, draft_id), message)

    def finished(self, chat_id: str, draft_id: int) -> bool:
        """This process posted the draft's final (a stop pressed after it is late)."""
        return (chat_id, draft_id) in self._finished

    def _draft(self, handle: MessageHandle) -> _Draft:
        """The handle's draft; one opened by another process (a turn taken over) joins here."""
        draft_id = draft_of(handle)
        assert draft_id is not None
        drafts = self._live.setdefault(handle.chat.key, [])
        for draft in drafts:
            if draft.draft_id == draft_id:
                return draft
        draft = _Draft(handle.chat, draft_id)
        drafts.append(draft)
        return draft

    async def _send(self, draft: _Draft, rendered: str, rank: Rank) -> None:
        chat = draft.chat
        thread = int(chat.thread_id) if chat.thread_id else None

        async def request(text: str, mode: str | None) -> object:
            try:
                return await self._bot.send_message_draft(
                    chat_id=int(chat.chat_id),
                    draft_id=draft.draft_id,
                    message_thread_id=thread,
                    text=text,
                    parse_mode=mode,
                    can_stop=True,
                    # what the user stopped stays until the stopped final replaces it
                    keep_on_stop=True,
                )
            except TelegramNotFound as exc:  # the method itself is unknown: an older server
                raise self._refuse(chat, DraftsRefused(exc.message, everywhere=True)) from exc
            except TelegramBadRequest as exc:
                if isinstance(bad_request(exc), ParseError):
                    raise  # the channel sends it again as plain text
                raise self._refuse(chat, DraftsRefused(exc.message)) from exc

        await self._deliver(chat, rendered, rank, request)
        draft.rendered, draft.at = rendered, asyncio.get_running_loop().time()

    def _refuse(self, chat: ChatRef, refusal: DraftsRefused) -> DraftsRefused:
        if refusal.everywhere and not self._refused_everywhere:
            self._refused_everywhere = True
            log.warning("%s; previews go by edits in every chat from now on", refusal)
        elif not refusal.everywhere and chat.chat_id not in self._refused:
            self._refused.put(chat.chat_id, None)
            log.warning("%s in chat %s; its previews go by edits from now on", refusal, chat.key)
        return refusal
