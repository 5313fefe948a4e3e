"""Updates in: long polling, or a webhook route on the gateway's aiohttp server; then aiogram's
Dispatcher routes each update to our handler, which normalizes it and hands it to the inbox:
messages, button presses, a draft's stop button (`stopped_message_generation`, as `/stop`) and,
with guest mode, guest summons. Both ask Telegram for exactly the kinds handled (`allowed_updates`
from the Dispatcher's handlers): Telegram keeps the list and sends nothing else.

We run the polling loop ourselves instead of `Dispatcher.start_polling`: cancelling that one
leaves its polling task running (it waits on `asyncio.wait`, which does not cancel what it waits
for), and its per-update tasks have no owner. Here one TaskGroup owns them all. The webhook route
is ours too, for the same reason; it checks the secret header in constant time before parsing.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from functools import partial
from typing import Literal, TypeVar

from aiogram import Bot, Dispatcher
from aiogram.exceptions import (
    ClientDecodeError,
    TelegramAPIError,
    TelegramBadRequest,
    TelegramConflictError,
    TelegramNetworkError,
    TelegramRetryAfter,
    TelegramServerError,
    TelegramUnauthorizedError,
)
from aiogram.types import CallbackQuery, Message, MessageGenerationStopped, Update
from aiogram.utils.backoff import Backoff, BackoffConfig
from aiohttp import web
from pydantic import ValidationError

from adapters.accounts import Accounts, AccountTaken
from adapters.base import ChannelError, InboundMessage, Inbox, Leader, OutboundContent, TryLater
from adapters.telegram.albums import MOST_S, QUIET_S, Albums
from adapters.telegram.buttons import pressed
from adapters.telegram.guests import Guests
from adapters.telegram.menu import commands
from adapters.telegram.normalize import BotIdentity, Unsupported, normalize, stop_press
from adapters.telegram.recent import Recent
from content.texts import DEFAULT_LANGUAGE, LANGUAGES

log = logging.getLogger(__name__)

T = TypeVar("T")
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
BACKOFF = BackoffConfig(min_delay=1.0, max_delay=30.0, factor=1.5, jitter=0.1)
# Telegram holds an empty poll open for its timeout; a server that answers it at once (a proxy,
# a test double) would otherwise be polled in a tight loop, hundreds of times a second.
EMPTY_POLL_GAP_S = 1.0
TRY_LATER_S = 1.0  # the gateway could not take an update (Redis down): poll it again after this
ALBUM_POLL_S = 0.25  # polling again while an album gathers (its updates are held unconfirmed)
REMEMBERED_UPDATES = 1024  # unsupported messages answered, so a redelivered one is not again
# ClientDecodeError: an answer that is not Telegram's JSON (a proxy's HTML error page)
RETRYABLE = (
    TelegramNetworkError,
    TelegramServerError,
    TelegramRetryAfter,
    TelegramConflictError,
    ClientDecodeError,
)
# the channel's answer to one message (a reply of its own, sent final)
Reply = Callable[[InboundMessage, OutboundContent], Awaitable[object]]


class Ingress:
    def __init__(
        self,
        bot: Bot,
        *,
        name: str,
        admits: Callable[[InboundMessage], bool],
        reply: Reply,
        mode: Literal["polling", "webhook"],
        secret: str | None,
        path: str,
        public_url: str | None,
        request_timeout_s: float,
        poll_timeout_s: int,
        album_wait_s: float = QUIET_S,
        menu: Sequence[str] = (),
        leader: Leader | None = None,
        accounts: Accounts | None = None,
        answered_draft: Callable[[str, int], bool] = lambda chat_id, draft_id: False,
        guests: Guests | None = None,
    ) -> None:
        """`answered_draft(chat id, draft id)`: that draft's final is out (a stop pressed on it
        came too late to stop anything)."""
        self.bot = bot
        self.name = name  # the channel instance's: it starts its chats' keys and event ids
        self._admits = admits
        self._reply = reply
        self._leader = leader
        self._accounts = accounts
        self.mode = mode
        self.dp = Dispatcher()
        self.dp.message.register(self._on_message)
        self.dp.callback_query.register(self._on_press)
        # registered, it is named in allowed_updates (polling and webhook): Telegram sends only
        # the kinds named there once any are
        self.dp.stopped_message_generation.register(self._on_stop_press)
        self._answered_draft = answered_draft
        self._guests = guests
        if guests is not None:  # guest_mode: guest_message joins allowed_updates
            self.dp.guest_message.register(self._on_guest)
        self.group: asyncio.TaskGroup | None = None  # owns update handlers and typing
        self._secret = (secret or "").encode()
        self._path = path
        self._public_url = public_url
        self._request_timeout_s = request_timeout_s
        self._poll_timeout_s = poll_timeout_s
        self._inbox: Inbox | None = None
        self._me: BotIdentity | None = None
        self._answered: Recent[str, None] = Recent(REMEMBERED_UPDATES)
        self._menu = tuple(menu)  # the deployment's commands beyond every chat's
        self._albums = Albums(quiet_s=album_wait_s, most_s=max(MOST_S, album_wait_s))
        # why Telegram has not answered this run (None: getMe and the set-up calls did)
        self.platform_trouble: str | None = "not started"

    def install(self, app: web.Application) -> None:
        if self.mode == "webhook":
            app.router.add_post(self._path, self._on_webhook)

    async def run(self, inbox: Inbox) -> None:
        self.platform_trouble = "getMe not answered yet"
        try:
            me = await self._retrying("getMe", self.bot.me)
            if self.mode == "webhook" and self._public_url:  # up once Telegram has our URL
                self.platform_trouble = "setWebhook not answered yet"
            self._me = BotIdentity(me.id, me.username or "")
            log.info("Telegram: @%s (%s)", me.username, self.mode)
            account = f"Telegram bot @{me.username} (id {me.id})"
            try:
                async with self._hold(f"telegram:{me.id}", account):
                    await self._serve(inbox, me.id)
            except AccountTaken as exc:
                raise ChannelError(str(exc)) from None
        finally:
            self.platform_trouble = "not running"

    def _hold(self, key: str, account: str) -> AbstractAsyncContextManager[None]:
        """The bot is ours while it runs: a second gateway on its token is refused, not left
        to take turns with us at Telegram's 409 Conflict (adapters/accounts.py)."""
        if self._accounts is None:
            return nullcontext()
        return self._accounts.hold(key, account, self.name)

    async def _serve(self, inbox: Inbox, bot_id: int) -> None:
        await self._set_menus()
        try:
            async with asyncio.TaskGroup() as group:
                self.group, self._inbox = group, inbox
                if self.mode == "webhook":
                    await self._register_webhook()
                    await asyncio.get_running_loop().create_future()
                elif self._leader is not None:  # Telegram allows one poller per bot
                    await self._leader.lead(f"telegram:{bot_id}:polling", lambda: self._poll(group))
                else:
                    await self._poll(group)
        finally:
            await self._albums.close()
            self.group = self._inbox = None

    async def _poll(self, group: asyncio.TaskGroup) -> None:
        await self._best_effort("deleteWebhook", lambda: self.bot.delete_webhook())
        fed_to: int | None = None  # past the last update fed
        held: set[int] = set()  # fed while the offset waits at an album not taken yet
        kinds = self.dp.resolve_used_update_types()
        wait = int(self._request_timeout_s + self._poll_timeout_s)  # the long poll holds it open
        clock = asyncio.get_running_loop().time
        while True:
            asked = clock()
            # an album not taken yet is not confirmed: killed now, Telegram sends it again
            pending = self._albums.first_pending()
            offset = fed_to if pending is None or fed_to is None else min(fed_to, pending)
            updates = await self._retrying(
                "getUpdates",
                lambda offset=offset: self.bot.get_updates(  # type: ignore[misc]
                    offset=offset,
                    timeout=self._poll_timeout_s,
                    allowed_updates=kinds,
                    request_timeout=wait,
                ),
            )
            fresh = [update for update in updates if update.update_id not in held]
            for update in fresh:
                try:
                    await self._feed(update)  # claims and queues it; the turn runs on its own
                except TryLater as exc:
                    # Not taken (Redis is down): poll it again from here, so it is not lost.
                    log.warning(
                        "Telegram update %s not taken (%s); retrying", update.update_id, exc
                    )
                    await asyncio.sleep(TRY_LATER_S)
                    break
                fed_to = update.update_id + 1
                held.add(update.update_id)
            if self._albums.first_pending() is None:
                held.clear()
            elif updates and not fresh:  # only what was fed: give the album time to gather
                await self._albums.settled(ALBUM_POLL_S)
            early = asked + EMPTY_POLL_GAP_S - clock()
            if not updates and early > 0:
                await asyncio.sleep(early)

    async def _on_webhook(self, request: web.Request) -> web.Response:
        given = request.headers.get(SECRET_HEADER, "").encode()
        if not secrets.compare_digest(given, self._secret):
            log.info("Telegram webhook: wrong or missing %s from %s", SECRET_HEADER, request.remote)
            return web.Response(status=401, text="Unauthorized")
        group = self.group
        if group is None:  # not started yet (or stopping): Telegram delivers it again later
            return web.Response(status=503, text="starting")
        try:
            update = Update.model_validate(await request.json(), context={"bot": self.bot})
        except (ValueError, ValidationError, RecursionError):  # nested too deep for json.loads
            return web.Response(status=400, text="expected a Telegram Update as JSON")
        try:
            await self._feed(update)  # claims and queues it; the turn runs on its own
        except TryLater as exc:  # nothing was kept: Telegram delivers it again later
            log.warning("Telegram update %s refused for now: %s", update.update_id, exc)
            return web.Response(status=503, text="try later")
        return web.json_response({})

    async def _feed(self, update: Update) -> None:
        """Hand one update to the gateway; `TryLater` when it could not be taken."""
        try:
            await self.dp.feed_update(self.bot, update)
        except TryLater:
            raise
        except Exception:
            log.exception("handling Telegram update %s failed", update.update_id)

    async def _on_message(self, message: Message, event_update: Update) -> None:
        inbox, me = self._inbox, self._me
        if inbox is None or me is None:
            return
        inbound = normalize(message, event_update.update_id, me, self.name)
        log.debug(
            "Telegram update %s from user %s in chat %s",
            event_update.update_id,
            message.from_user.id if message.from_user else None,
            message.chat.id,
        )
        if isinstance(inbound, Unsupported):
            await self._decline(inbound)
        elif inbound is not None and message.media_group_id:
            webhook = self.mode == "webhook"  # its request is answered once the album is taken
            album = message.media_group_id
            await self._albums.add(album, event_update.update_id, inbound, inbox, wait=webhook)
        elif inbound is not None:
            await inbox(inbound)

    async def _on_press(self, query: CallbackQuery, event_update: Update) -> None:
        """A button of ours pressed: answered at once (the client's spinner stops), then handed
        on as an action; the gateway decides what it does."""
        inbox = self._inbox
        if inbox is None:
            return
        await self._best_effort("answerCallbackQuery", lambda: query.answer())
        inbound = pressed(query, event_update.update_id, self.name)
        if inbound is not None:
            await inbox(inbound)

    async def _on_stop_press(self, stopped: MessageGenerationStopped, event_update: Update) -> None:
        """A draft's stop button: the user's `/stop` (the app stops only showing the draft; the
        work is stopped by the command). A press on a draft whose answer is out is too late."""
        inbox, me = self._inbox, self._me
        if inbox is None or me is None:
            return
        if self._answered_draft(str(stopped.chat.id), stopped.draft_id):
            log.debug("Telegram stop pressed on answered draft %s", stopped.draft_id)
            return
        await inbox(stop_press(stopped, event_update.update_id, me, self.name))

    async def _on_guest(self, message: Message, event_update: Update) -> None:
        inbox, me = self._inbox, self._me
        if inbox is not None and me is not None and self._guests is not None:
            await self._guests.summoned(message, event_update.update_id, me, inbox, self.group)

    async def _decline(self, unsupported: Unsupported) -> None:
        """Name what we can read. The gateway never sees these (it has nothing to hand the model),
        so its two guards are applied here: the same access policy, and each update once."""
        message = unsupported.message
        if message.event_id in self._answered or not self._admits(message):
            return
        self._answered.put(message.event_id, None)
        await self._reply(message, OutboundContent(unsupported.reply))

    async def _register_webhook(self) -> None:
        if not self._public_url:
            log.warning(
                "Telegram webhook mode without server.public_url: register %s with "
                "Telegram's setWebhook yourself, with the secret token",
                self._path,
            )
            return
        url = self._public_url.rstrip("/") + self._path
        kinds = self.dp.resolve_used_update_types()
        try:
            await self._retrying(
                "setWebhook",
                lambda: self.bot.set_webhook(
                    url=url, secret_token=self._secret.decode(), allowed_updates=kinds
                ),
            )
        except TelegramBadRequest as exc:
            raise ChannelError(
                f"Telegram refused the webhook URL {url!r}: {exc.message}; server.public_url must "
                "be a public https URL on port 443, 80, 88 or 8443"
            ) from exc
        log.info("Telegram webhook registered at %s", url)

    async def _retrying(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        """Retry network trouble, 5xx and 429 with backoff; a refused token stops the channel."""
        backoff = Backoff(BACKOFF)
        while True:
            try:
                answer = await call()
                self.platform_trouble = None
                return answer
            except TelegramUnauthorizedError as exc:
                raise ChannelError(
                    "Telegram refused the bot token (401 Unauthorized); check TELEGRAM_BOT_TOKEN "
                    "against @BotFather"
                ) from exc
            except RETRYABLE as exc:
                delay = getattr(exc, "retry_after", None) or backoff.next_delay
                self.platform_trouble = f"Telegram {what} failed ({type(exc).__name__})"
                if isinstance(exc, TelegramConflictError):
                    log.warning(
                        "Telegram %s: another process polls this bot or a webhook is set"
                        " (%s); retrying in %.1fs",
                        what,
                        exc.message,
                        delay,
                    )
                else:
                    log.warning(
                        "Telegram %s failed (%s: %s); retrying in %.1fs",
                        what,
                        type(exc).__name__,
                        exc.message,  # not str(): a ClientDecodeError's holds the whole page
                        delay,
                    )
                await asyncio.sleep(delay)
                next(backoff)

    async def _best_effort(self, what: str, call: Callable[[], Awaitable[object]]) -> bool:
        """A call we can do without: whatever Telegram answers (a 404 from an old server or a
        proxy, say), log it and go on rather than restart the channel over it. Whether it went."""
        try:
            await call()
        except (TelegramAPIError, ClientDecodeError) as exc:
            log.warning("Telegram %s failed (%s); carrying on", what, exc.message)
            return False
        return True

    async def _set_menus(self) -> None:
        """The command menu, and one per language of ours: Telegram shows each user the menu of
        their app's language. A server that refuses the first is not asked for the others."""
        if not await self._best_effort(
            "setMyCommands",
            partial(self.bot.set_my_commands, commands(DEFAULT_LANGUAGE, self._menu)),
        ):
            return
        for language in LANGUAGES:
            if language != DEFAULT_LANGUAGE:
                menu = partial(
                    self.bot.set_my_commands,
                    commands(language, self._menu),
                    language_code=language,
                )
                await self._best_effort("setMyCommands", menu)
