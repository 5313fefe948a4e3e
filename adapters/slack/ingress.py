"""Events in, through slack-bolt's `AsyncApp`: Socket Mode (the default) or HTTP events.

Bolt does what it is for: its request verifier refuses a forged, replayed (5-minute window) or
unsigned HTTP request before any listener runs, it answers `url_verification`, acknowledges
every event at once (the turn runs on its own) and drops this bot's own messages. Our
listeners normalize what is left (normalize.py) and hand it to the gateway, whose durable claim
on the message id answers Slack's retries and its message/app_mention pairs once.

A revoked token (`auth.test` refused, `tokens_revoked`/`app_uninstalled`, a call refused with
`token_revoked`) ends `run()` with `ChannelRevoked`: the channel stops, the process goes on.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, Literal

import aiohttp
from aiohttp import web
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.base import ChannelError, ChannelRevoked, ChatRef, InboundMessage, Inbox
from adapters.slack import normalize
from adapters.slack.bolt import hand_auth_test
from adapters.slack.errors import REVOKED
from adapters.slack.normalize import BotIdentity
from adapters.slack.presence import AssistantStatus
from adapters.slack.throttle import WorkspaceSlots
from adapters.telegram.recent import Recent

log = logging.getLogger(__name__)

REMEMBERED = 8192  # threads the bot is in, users' last threads per channel
ANY = re.compile(".*")
SUGGESTED_PROMPTS = [
    {"title": "What can you do?", "message": "What can you do?"},
    {"title": "Start over", "message": "new"},
]


class _TokenSkipped(logging.Filter):
    """Drops bolt's start-up warning that `token` will be unused. We hand `AsyncApp` our own
    client (its token, base URL and timeouts); bolt also reads SLACK_BOT_TOKEN from the
    environment, where deployments keep it, and then warns about a token we never passed."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != warning_client_prioritized_and_token_skipped()


_BOLT_LOG = logging.getLogger(f"slack_bolt.{AsyncApp.__name__}")
if not any(isinstance(f, _TokenSkipped) for f in _BOLT_LOG.filters):
    _BOLT_LOG.addFilter(_TokenSkipped())


def _is_timestamp(value: str) -> bool:
    """Unix seconds as Slack sends them: ASCII digits only (int() also takes " 1", "1_0", "１")."""
    return 0 < len(value) <= 12 and value.isascii() and value.isdigit()


class Ingress:
    def __init__(
        self,
        client: AsyncWebClient,
        *,
        name: str,
        slots: WorkspaceSlots,
        status: AssistantStatus,
        connect: Callable[[], None],
        mode: Literal["socket", "http"],
        app_token: str,
        signing_secret: str,
        path: str,
        admits: Callable[[InboundMessage], bool],
        answered: Callable[[str], Awaitable[bool]] | None = None,
        latest_conversation: Callable[[str, str, str], Awaitable[str | None]] | None = None,
        agent_view: bool = False,
        streams_ended: Callable[[str, list[str]], None] | None = None,
    ) -> None:
        self.client = client
        # Slack ended these streams itself (a session's stop): the final updates them at once
        self._streams_ended = streams_ended
        self.agent_view = agent_view  # each top-level DM message is a thread root
        self.name = name  # the channel instance's: it starts its chats' keys and event ids
        self._slots = slots
        self._status = status
        self._connect = connect  # the channel's connection pool, opened in the running loop
        self.mode = mode
        self._app_token = app_token
        self._path = path
        self._admits = admits
        self._answered = answered
        self._latest_conversation = latest_conversation
        self.app = AsyncApp(
            client=client,
            signing_secret=signing_secret or "socket-mode-has-no-signing-secret",
            process_before_response=False,
        )
        self.app.event("message")(self._on_message)
        self.app.event("app_mention")(self._on_message)
        self.app.event("assistant_thread_started")(self._on_assistant_thread)
        self.app.event("assistant_thread_context_changed")(self._ignore)
        self.app.event("agent_session_stopped")(self._on_session_stopped)
        self.app.event("app_context_changed")(self._ignore)
        self.app.event("tokens_revoked")(self._on_revoked)
        self.app.event("app_uninstalled")(self._on_revoked)
        self.app.command(ANY)(self._on_command)
        self.app.action(ANY)(self._on_action)
        self.connected = False
        self._inbox: Inbox | None = None
        self._me: BotIdentity | None = None
        self._stop: asyncio.Future[None] | None = None
        self._revoked: ChannelRevoked | None = None
        self._threads: Recent[tuple[str, str], None] = Recent(REMEMBERED)
        self._last_thread: Recent[tuple[str, str], str] = Recent(REMEMBERED)  # (chan, user)

    def install(self, app: web.Application) -> None:
        if self.mode == "http":
            app.router.add_post(self._path, self._on_http)

    async def run(self, inbox: Inbox) -> None:
        if self._revoked is not None:
            raise self._revoked
        self._me = await self._whoami()
        self._slots.home_team = self._me.team_id
        self._stop = asyncio.get_running_loop().create_future()
        self._inbox = inbox
        handler: AsyncSocketModeHandler | None = None
        try:
            if self.mode == "socket":
                handler = AsyncSocketModeHandler(self.app, self._app_token)
                try:
                    await handler.connect_async()  # type: ignore[no-untyped-call]
                except SlackApiError as exc:
                    raise self._refused("apps.connections.open (the app token)", exc) from exc
                except (aiohttp.ClientError, TimeoutError) as exc:
                    raise _unreachable("Socket Mode", exc) from exc
            self.connected = True
            log.info(
                "Slack: connected as <@%s> in %s (%s)",
                self._me.user_id,
                self._me.team_id,
                self.mode,
            )
            await self._stop  # until cancelled, or a revoked token sets it
        finally:
            self.connected = False
            self._inbox = self._stop = None
            if handler is not None:
                await handler.close_async()  # type: ignore[no-untyped-call]

    def revoked(self, reason: str) -> ChannelRevoked:
        """The token no longer works: stop the channel (once), and say so to the caller."""
        if self._revoked is None:
            self._revoked = ChannelRevoked(
                f"{reason}; the app was uninstalled or its token revoked: reinstall it and set "
                "SLACK_BOT_TOKEN (and SLACK_APP_TOKEN) to the new tokens"
            )
            if self._stop is not None and not self._stop.done():
                self._stop.set_exception(self._revoked)
        return self._revoked

    def joined(self, chat: ChatRef) -> None:
        """The bot posted in this thread: replies in it continue the conversation."""
        if chat.thread_id and not chat.chat_id.startswith("D"):
            self._threads.put((chat.chat_id, chat.thread_id), None)

    async def _whoami(self) -> BotIdentity:
        self._connect()
        try:
            auth = await self.client.auth_test()
        except SlackApiError as exc:
            raise self._refused("auth.test (the bot token)", exc) from exc
        except (aiohttp.ClientError, TimeoutError) as exc:  # the supervisor retries, with backoff
            raise _unreachable("auth.test", exc) from exc
        # Bolt would make its own auth.test on the first event, and keep a revoked token's
        # refusal to itself: it is handed ours (bolt.py)
        hand_auth_test(self.app, auth)
        return BotIdentity(
            str(auth["user_id"]), str(auth.get("bot_id") or ""), str(auth["team_id"])
        )

    def _refused(self, what: str, exc: SlackApiError) -> ChannelError:
        error = exc.response.data.get("error") if isinstance(exc.response.data, dict) else None
        if error in REVOKED:
            return self.revoked(f"Slack refused {what}: {error}")
        return ChannelError(f"Slack refused {what}: {error or exc}")

    async def _on_http(self, request: web.Request) -> web.Response:
        """Bolt's own dispatch: signature check first, then the listeners (acknowledged at once).

        Before `run()` has its inbox (starting, stopping, stopped) an event would be acknowledged
        and lost: 503 instead, and Slack delivers it again."""
        if self._inbox is None:
            return web.Response(status=503, text="not ready")
        if not _is_timestamp(request.headers.get("X-Slack-Request-Timestamp", "")):
            # slack_sdk's verifier parses it with int() before comparing the signature: a
            # non-number is a 500 and a traceback per request, for anyone, without the secret
            log.info("Slack event refused from %s: the timestamp is not a number", request.remote)
            return web.Response(status=401, text="invalid request")
        body = await request.text()
        bolt_request = AsyncBoltRequest(
            body=body, query=request.query_string, headers=dict(request.headers)
        )
        response = await self.app.async_dispatch(bolt_request)
        return web.Response(
            status=response.status,
            text=response.body,
            headers={
                k: v[0] for k, v in response.headers.items() if v and k.lower() != "content-length"
            },
        )

    async def _on_message(self, event: dict[str, Any], body: dict[str, Any]) -> None:
        inbox, me = self._inbox, self._me
        if inbox is None or me is None:
            return
        team = str(body.get("team_id") or me.team_id)
        message = normalize.message(
            event, team, me, lambda c, t: (c, t) in self._threads, self.name, self.agent_view
        )
        if message is None:
            return
        if message.is_group and not message.mentioned and await self._answered_thread(message):
            message = replace(message, mentioned=True)
        if message.is_group and not message.mentioned and not self._admits(message):
            return  # channel chatter not for us: not even a claim in the database
        chat = message.chat
        if chat.thread_id and message.mentioned:
            if message.is_group or self.agent_view:
                self._last_thread.put((chat.chat_id, message.user_id), chat.thread_id)
            if message.is_group:
                self._threads.put((chat.chat_id, chat.thread_id), None)
            else:
                self._status.mark(chat.chat_id, chat.thread_id)
        log.debug("Slack message %s from %s in %s", message.message_id, message.user_id, chat.key)
        await inbox(message)

    async def _answered_thread(self, message: InboundMessage) -> bool:
        """A reply in a channel thread the bot answered in before this process started (the
        threads it answers in now are remembered in memory): the store knows its turns."""
        thread_ts = message.raw["event"].get("thread_ts")
        if self._answered is None or not thread_ts or thread_ts == message.message_id:
            return False
        if not await self._answered(message.conversation_key):
            return False
        self._threads.put((message.chat.chat_id, str(thread_ts)), None)
        return True

    async def _on_command(self, ack: Any, body: dict[str, Any]) -> None:
        await ack()
        inbox, me = self._inbox, self._me
        if inbox is None or me is None:
            return
        channel, user = str(body.get("channel_id", "")), str(body.get("user_id", ""))
        team = str(body.get("team_id") or me.team_id)
        # A slash command carries no thread: in a channel it means the user's latest thread,
        # and in a DM too where each DM message starts one (agent view).
        direct = channel.startswith("D") and not self.agent_view
        thread = None if direct else await self._latest_thread(channel, user)
        chat = ChatRef(self.name, channel, thread, team_id=team)
        await inbox(normalize.command(body, chat))

    async def _latest_thread(self, channel: str, user: str) -> str | None:
        """The user's latest thread with the bot in a channel: the store's (it spans restarts
        and processes), else the one this process saw (its turn may not be stored yet)."""
        if self._latest_conversation is not None:
            prefix = ChatRef(self.name, channel).key + ":"
            key = await self._latest_conversation(self.name, prefix, user)
            if key is not None:
                return key.removeprefix(prefix)
        return self._last_thread.get((channel, user))

    async def _on_action(self, ack: Any, body: dict[str, Any]) -> None:
        await ack()
        inbox, me = self._inbox, self._me
        if inbox is None or me is None:
            return
        team = str((body.get("team") or {}).get("id") or me.team_id)
        message = normalize.action(body, team, self.name)
        if message is not None:
            await inbox(message)

    async def _on_assistant_thread(self, event: dict[str, Any]) -> None:
        thread = event.get("assistant_thread") or {}
        channel, ts = thread.get("channel_id"), thread.get("thread_ts")
        if not channel or not ts:
            return
        self._status.mark(str(channel), str(ts))
        try:
            await self.client.assistant_threads_setSuggestedPrompts(
                channel_id=channel, thread_ts=ts, prompts=SUGGESTED_PROMPTS
            )
        except SlackApiError as exc:
            log.debug("suggested prompts not set in %s: %s", channel, exc)

    async def _on_session_stopped(self, event: dict[str, Any], body: dict[str, Any]) -> None:
        inbox, me = self._inbox, self._me
        if inbox is None or me is None:
            return
        team = str(body.get("team_id") or me.team_id)
        stopped = event.get("streaming_message_ts")
        if self._streams_ended and isinstance(stopped, list) and event.get("channel"):
            self._streams_ended(str(event["channel"]), [str(ts) for ts in stopped])
        message = normalize.session_stopped(event, team, self.name)
        if message is not None:
            log.debug("Slack agent session stopped by %s in %s", message.user_id, message.chat.key)
            await inbox(message)

    async def _on_revoked(self, event: dict[str, Any]) -> None:
        self.revoked(f"Slack sent {event.get('type')}")

    async def _ignore(self) -> None:
        return None


def _unreachable(what: str, exc: BaseException) -> ChannelError:
    return ChannelError(f"Slack unreachable for {what} ({type(exc).__name__}: {exc})")
