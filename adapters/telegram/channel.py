"""The Telegram channel: live drafts, placeholders, edits and finals through aiogram, inside a
per-chat budget.

A turn in a private chat streams as a live draft (`sendMessageDraft`, drafts.py: its previews
update one draft, its final is one `sendMessage`); in groups, with `drafts: off`, or where
Telegram refuses drafts, the placeholder is a message edited into the answer. A guest summon
(guest_mode, guests.py) is answered once through `answerGuestQuery`. Every call to a chat takes
the chat's slot in a `RateBudget` (scopes in throttle.py), so drafts, previews, "typing" and
finals together stay under Telegram's rate; a 429 pauses the whole chat. Text is rendered from
markdown to HTML; if Telegram cannot parse it, the same message goes again as plain text. An
edit to the text a message already shows makes no call (a final edit still ends "typing…"), so
the final edit is always handed to us (`final_marker`). Every aiogram and network error leaves
here as a `ChannelError`. Receiving updates (long polling or webhook) is in ingress.py.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Literal, TypeVar

from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import PRODUCTION, TelegramAPIServer
from aiogram.enums import ChatAction, ParseMode
from aiogram.exceptions import (
    AiogramError,
    ClientDecodeError,
    TelegramAPIError,
    TelegramBadRequest,
    TelegramNetworkError,
    TelegramRetryAfter,
)
from aiogram.types import LinkPreviewOptions, ReplyParameters
from aiogram.utils.token import TokenValidationError
from aiohttp import web

from adapters.accounts import Accounts
from adapters.base import (
    Attachment,
    ChannelError,
    ChannelLimits,
    ChatRef,
    InboundMessage,
    Inbox,
    Leader,
    MessageHandle,
    OutboundContent,
    RateLimited,
)
from adapters.budget import Busy, LocalRateBudget, Rank, RateBudget
from adapters.platform_calls import NO_PLATFORM_CALLS, PlatformCalls
from adapters.telegram import media
from adapters.telegram.buttons import keyboard
from adapters.telegram.calls import CountedCalls
from adapters.telegram.drafts import REFRESH_S, Drafts, draft_of
from adapters.telegram.errors import NotModified, ParseError, bad_request, lost
from adapters.telegram.guests import ANSWER_WITHIN_S, Guests, is_guest
from adapters.telegram.ingress import Ingress
from adapters.telegram.presence import TypingStatus
from adapters.telegram.recent import Recent
from adapters.telegram.render import rendered_length, to_html, visible_text
from adapters.telegram.throttle import ChatSlots
from content.blobs import BlobStore
from content.parts import BlobRef, MediaPart

log = logging.getLogger(__name__)

T = TypeVar("T")
MAX_TEXT = 4096  # UTF-16 code units after entity parsing
NO_PREVIEW = LinkPreviewOptions(is_disabled=True)  # model-written links never unfurl
REMEMBERED_TEXTS = 4096  # messages whose last sent text is kept, to skip edits that change nothing


@dataclass(frozen=True, slots=True)
class TelegramLimits(ChannelLimits):
    def length(self, text: str) -> int:
        return rendered_length(text, limit=self.max_text_length)


class TelegramChannel:
    """Private chats (and their topics), groups and forum topics, guest summons; long polling or
    a webhook on the gateway's server."""

    def __init__(
        self,
        *,
        token: str,
        name: str = "telegram",  # the instance's id: one bot of several (channels.telegram[])
        mode: Literal["polling", "webhook"] = "polling",
        api_base: str | None = None,
        webhook_secret: str | None = None,
        webhook_path: str = "/telegram/webhook",
        public_url: str | None = None,
        private_edit_interval_s: float = 1.0,
        group_edit_interval_s: float = 3.0,
        album_wait_s: float = 0.8,
        drafts: Literal["auto", "off"] = "auto",
        draft_refresh_s: float = REFRESH_S,  # a draft unchanged this long is sent again
        guest_mode: bool = False,
        guest_answer_s: float = ANSWER_WITHIN_S,  # a guest summon's time box
        menu: Sequence[str] = (),
        request_timeout_s: float = 15.0,
        poll_timeout_s: int = 25,
        admits: Callable[[InboundMessage], bool] | None = None,
        budget: RateBudget | None = None,
        calls: PlatformCalls = NO_PLATFORM_CALLS,
        leader: Leader | None = None,
        accounts: Accounts | None = None,
    ) -> None:
        """`admits` is the gateway's access policy, for the replies the channel sends itself;
        `budget` paces the calls (one in this process unless given, e.g. shared over Redis);
        `calls` counts every Bot API call for /metrics; `leader` elects the one process that
        long-polls when several serve the bot."""
        self.name = name
        if mode == "webhook" and not webhook_secret:
            raise ValueError(
                "channels.telegram.webhook_secret is required in webhook mode (without it anyone "
                "could post fake updates); set TELEGRAM_WEBHOOK_SECRET to 1-256 characters A-Z a-z 0-9 _ -"
            )
        api = TelegramAPIServer.from_base(api_base.rstrip("/")) if api_base else PRODUCTION
        try:
            self.bot = Bot(token, session=AiohttpSession(api=api, timeout=request_timeout_s))
        except TokenValidationError:
            raise ValueError(
                "channels.telegram.token is empty or malformed; set TELEGRAM_BOT_TOKEN to the "
                "token @BotFather gave you (it looks like 123456789:AA...)"
            ) from None
        self.bot.session.middleware(CountedCalls(calls))
        self.mode = mode
        self._timeout_s = request_timeout_s
        self.admits: Callable[[InboundMessage], bool] = admits or (lambda message: True)
        self._private_limits = TelegramLimits(MAX_TEXT, private_edit_interval_s, final_marker=True)
        self._group_limits = TelegramLimits(MAX_TEXT, group_edit_interval_s, final_marker=True)
        self._guest_limits = TelegramLimits(MAX_TEXT, private_edit_interval_s, can_edit=False)
        self._sent: Recent[tuple[str, str], str] = Recent(REMEMBERED_TEXTS)  # -> rendered text
        self._budget = ChatSlots(
            budget or LocalRateBudget(),
            self.bot.id,
            lambda chat_id: self._limits(chat_id).min_edit_interval_s,
        )
        self._typing = TypingStatus(
            self._send_typing, lambda chat: self._limits(chat.chat_id).min_edit_interval_s
        )
        self._drafts = Drafts(
            self.bot,
            lambda chat, rendered, rank, request: self._deliver(chat, rendered, rank, request),
            enabled=drafts == "auto",
            refresh_s=draft_refresh_s,
        )
        self._guests = (
            Guests(self.bot, name, self._guest_call, answer_within_s=guest_answer_s)
            if guest_mode
            else None
        )
        self.ingress = Ingress(
            self.bot,
            name=name,
            admits=self.admits,
            reply=self._reply,
            mode=mode,
            secret=webhook_secret,
            path=webhook_path,
            public_url=public_url,
            request_timeout_s=request_timeout_s,
            poll_timeout_s=poll_timeout_s,
            album_wait_s=album_wait_s,
            menu=menu,
            leader=leader,
            accounts=accounts,
            answered_draft=self._drafts.finished,
            guests=self._guests,
        )

    def limits_for(self, chat: ChatRef) -> ChannelLimits:
        return self._guest_limits if is_guest(chat) else self._limits(chat.chat_id)

    def _limits(self, chat_id: str) -> TelegramLimits:
        # Group and channel ids are negative, users' (and so private chats') positive.
        return self._group_limits if chat_id.startswith("-") else self._private_limits

    def install(self, app: web.Application) -> None:
        """Webhook mode: add the webhook route to the gateway's aiohttp app."""
        self.ingress.install(app)

    async def run(self, inbox: Inbox) -> None:
        """Receive updates until cancelled (long polling, or the webhook route).

        The HTTP session stays open: turns still finishing (a stop's last edits) need it. The
        app closes it (`aclose`) once they have ended."""
        await self.ingress.run(inbox)  # its TaskGroup owns the typing tasks too

    def platform_down(self) -> str | None:
        return self.ingress.platform_trouble

    async def aclose(self) -> None:
        """Close the HTTP session (aiogram opens a new one on the next call)."""
        await self.bot.session.close()

    async def send(
        self,
        chat: ChatRef,
        content: OutboundContent,
        *,
        reply_to: str | None = None,
        final: bool = False,
        recipient: str | None = None,
    ) -> MessageHandle:
        if is_guest(chat):  # no placeholder there (it cannot be edited): this is the answer
            if self._guests is None:
                raise ChannelError("channels.telegram.guest_mode is off")
            return await self._guests.answer(chat, content.text)
        reply = _reply(reply_to)
        markup = keyboard(content.display)
        if not final and markup is None and self._drafts.wanted(chat):
            try:
                handle = await self._drafts.open(chat, to_html(content.text), reply_to)
            except RateLimited:
                raise
            except ChannelError as exc:  # refused (remembered), or lost: a message instead
                log.info("no draft in %s (%s); posting a placeholder message", chat.key, exc)
            else:
                self._typing.start(chat, self.ingress.group)  # keeps the draft alive
                return handle

        def request(text: str, mode: str | None) -> Awaitable[object]:
            return self.bot.send_message(
                chat_id=chat.chat_id,
                text=text,
                parse_mode=mode,
                message_thread_id=_thread(chat),
                reply_parameters=reply,
                link_preview_options=NO_PREVIEW,
                reply_markup=markup,
            )

        rendered = to_html(content.text)
        message = await self._deliver(
            chat, rendered, "final" if final else "send", request, sending=True
        )
        message_id = str(message.message_id)  # type: ignore[attr-defined]
        shown = rendered if markup is None else f"{rendered}\n{markup.model_dump_json()}"
        self._sent.put((chat.chat_id, message_id), shown)
        # A new final message ends nothing: a turn's "typing…" ends with its final edit, and a
        # reply of its own (/help, a refusal) must not end the typing of a turn still running.
        if not final:
            self._typing.start(chat, self.ingress.group)
        return MessageHandle(chat, message_id)

    async def _reply(self, message: InboundMessage, content: OutboundContent) -> None:
        await self.send(message.chat, content, reply_to=message.message_id, final=True)

    async def edit(
        self, handle: MessageHandle, content: OutboundContent, *, final: bool = False
    ) -> None:
        if draft_of(handle) is not None:
            if final:
                self._typing.stop(handle.chat)
            await self._drafts.edit(handle, content, final, post=self._post, edit=self.edit)
            return
        chat = handle.chat
        markup = keyboard(content.display)  # none: the message's buttons go (an answer came)

        def request(text: str, mode: str | None) -> Awaitable[object]:
            return self.bot.edit_message_text(
                chat_id=chat.chat_id,
                message_id=int(handle.message_id),
                text=text,
                parse_mode=mode,
                link_preview_options=NO_PREVIEW,
                reply_markup=markup,
            )

        key = (chat.chat_id, handle.message_id)
        # the buttons are part of what was sent: the same text with other buttons is an edit
        rendered = to_html(content.text)
        shown = rendered if markup is None else f"{rendered}\n{markup.model_dump_json()}"
        try:
            if self._sent.get(key) != shown:
                await self._deliver(chat, rendered, "final" if final else "preview", request)
                self._sent.put(key, shown)
        except NotModified:
            self._sent.put(key, shown)
        finally:
            if final:
                self._typing.stop(chat)

    async def fetch(
        self, message: InboundMessage, attachment: Attachment, blobs: BlobStore
    ) -> BlobRef:
        return await media.fetch(self.bot, message, attachment, blobs, self._timeout_s)

    async def send_part(
        self,
        chat: ChatRef,
        part: MediaPart,
        blobs: BlobStore,
        *,
        caption: str | None = None,
        reply_to: str | None = None,
    ) -> MessageHandle:
        if is_guest(chat):
            raise ChannelError("a guest answer is one text message")
        _, data = await blobs.get(part.blob.blob_id)
        sent = await media.send_part(
            self.bot,
            lambda chat, rank: self._call(chat, rank, sending=True),
            chat,
            part,
            data,
            caption=caption,
            reply=_reply(reply_to),
            thread=_thread(chat),
        )
        return MessageHandle(chat, str(sent.message_id))

    async def _deliver(
        self,
        chat: ChatRef,
        rendered: str,
        rank: Rank,
        request: Callable[[str, str | None], Awaitable[T]],
        *,
        sending: bool = False,
    ) -> T:
        plain = visible_text(rendered)
        if not plain.strip():
            rendered = plain = "…"  # Telegram refuses empty text
        try:
            async with self._call(chat, rank, sending=sending):
                result = await request(rendered, ParseMode.HTML)
        except ParseError as exc:
            log.info(
                "Telegram could not parse our HTML in %s (%s); sending plain text", chat.key, exc
            )
            async with self._call(chat, "final" if rank == "final" else "send", sending=sending):
                result = await request(plain, None)
        self._typing.shown(chat)
        return result

    @asynccontextmanager
    async def _call(
        self, chat: ChatRef, rank: Rank, *, sending: bool = False
    ) -> AsyncIterator[None]:
        """One Bot API call to `chat` inside its budget, its errors as `ChannelError`s.

        `sending`: the call posts a new message, so a lost answer is `DeliveryUncertain`.
        """
        try:
            async with self._budget.slot(chat.chat_id, rank):
                yield
        except Busy as exc:
            raise RateLimited(exc.retry_after, "chat budget in use") from None
        except TelegramRetryAfter as exc:
            log.warning("Telegram 429 in %s: retry after %ss", chat.key, exc.retry_after)
            await self._budget.penalize(chat.chat_id, exc.retry_after)
            raise RateLimited(exc.retry_after, "Telegram flood control") from exc
        except TelegramBadRequest as exc:
            raise bad_request(exc) from exc
        except (TelegramNetworkError, ClientDecodeError, UnicodeDecodeError, OSError) as exc:
            raise lost(exc, sending) from exc
        except TelegramAPIError as exc:
            raise ChannelError(f"Telegram {type(exc).__name__}: {exc.message}") from exc
        except AiogramError as exc:
            raise ChannelError(f"Telegram call failed in aiogram: {type(exc).__name__}") from exc

    async def _post(
        self, chat: ChatRef, content: OutboundContent, reply_to: str | None
    ) -> MessageHandle:
        return await self.send(chat, content, reply_to=reply_to, final=True)

    def _guest_call(self, chat: ChatRef) -> AbstractAsyncContextManager[None]:
        return self._call(chat, "final", sending=True)

    async def _send_typing(self, chat: ChatRef) -> None:
        if await self._drafts.refresh(chat):
            return  # the draft shows the turn at work
        async with self._call(chat, "preview"):
            await self.bot.send_chat_action(
                chat_id=chat.chat_id, action=ChatAction.TYPING, message_thread_id=_thread(chat)
            )


def _reply(reply_to: str | None) -> ReplyParameters | None:
    if not reply_to:
        return None
    return ReplyParameters(message_id=int(reply_to), allow_sending_without_reply=True)


def _thread(chat: ChatRef) -> int | None:
    return int(chat.thread_id) if chat.thread_id else None
