"""The Slack channel: each answer is one message in its thread, streamed natively or updated.

`channels.slack.streaming: native` (the default) makes an answer one Slack stream
(stream.py): `chat.startStream` is the placeholder, each preview a `chat.appendStream` of
what is new (the answer's text as markdown, the turn's steps as task cards), `chat.stopStream`
the final, its display hints as blocks under the text. A stream only appends, so:

(a) a note shown while no answer streams (a `SendMessage` note, "Asking Researcher…") is the
    plan's title, which is replaced, never text that would later have to vanish; steps are
    tasks whose status changes (in progress, complete, error) rather than lines to remove;
(b) an answer the model restarted (it no longer begins with what was streamed) or a final
    that does not extend it ends the stream, and the same message is `chat.update`d: still
    one message;
(c) whatever a stream cannot do falls back to the `chat.update` path: a DM without a thread
    (a stream must be a reply), a channel without the recipient's ids, a start Slack refuses
    or none free under its rate, a stream Slack ended (after about five minutes, or the
    user's stop), the parts of an answer too long for one message, and `streaming: update`.

Each method has its workspace budget (throttle.py): appendStream Tier 4, start and stop Tier 2,
chat.update Tier 3 (~50 a minute, shared by every answer there), and a `ratelimited` that
comes anyway pauses that method in the workspace for its `Retry-After`; the final still lands.
A stream takes standard markdown (`<!`, `<@`, `<#` defused); updates carry mrkdwn (render.py
says why) with display hints as Block Kit. Every slack_sdk and network error leaves here as a
`ChannelError`; a revoked token stops the channel (not the process) through `ChannelRevoked`.
Receiving (Socket Mode or HTTP events) is in ingress.py.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
from aiohttp import web
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.base import (
    Attachment,
    ChannelLimits,
    ChatRef,
    InboundMessage,
    Inbox,
    MessageGone,
    MessageHandle,
    OutboundContent,
    RateLimited,
)
from adapters.budget import Busy, LocalRateBudget, Rank, RateBudget
from adapters.platform_calls import NO_PLATFORM_CALLS, PlatformCalls
from adapters.slack import errors, files
from adapters.slack.ingress import Ingress
from adapters.slack.presence import AssistantStatus
from adapters.slack.render import blocks, hint_blocks, mrkdwn_bytes, to_mrkdwn
from adapters.slack.stream import Streams
from adapters.slack.throttle import StreamRates, WorkspaceSlots
from adapters.telegram.recent import Recent
from content.blobs import BlobStore
from content.parts import BlobRef, MediaPart

log = logging.getLogger(__name__)

DEFAULT_API = "https://slack.com/api/"
MAX_TEXT_BYTES = 3900  # updates fail with msg_too_long near 4,000 bytes of text
REMEMBERED_TEXTS = 4096
BUSY_RETRY_S = 20.0  # the longest a preview the budget turned away waits to be tried again
STREAM_INTERVAL_S = 1.0  # a stream appends at most once a second: Tier 4 is 100+ a minute
STREAM_METHODS = frozenset({"chat.startStream", "chat.appendStream", "chat.stopStream"})
COUNTED = {
    "chat.update": "updates",
    "chat.startStream": "streams",
    "chat.appendStream": "appends",
    "chat.stopStream": "stops",
}


@dataclass(frozen=True, slots=True)
class SlackLimits(ChannelLimits):
    def length(self, text: str) -> int:
        return mrkdwn_bytes(text, limit=self.max_text_length)


class SlackChannel:
    """DMs, channel mentions and their threads, through one Slack app (one bot token)."""

    def __init__(
        self,
        *,
        bot_token: str,
        name: str = "slack",  # the instance's id: one app of several (channels.slack[])
        app_token: str = "",
        signing_secret: str = "",
        mode: Literal["socket", "http"] = "socket",
        path: str = "/slack/events",
        api_base: str | None = None,
        updates_per_minute: float = 45.0,
        edit_interval_s: float = 3.0,
        streaming: Literal["native", "update"] = "native",
        agent_view: bool = False,
        stream_rates: StreamRates | None = None,
        request_timeout_s: float = 10.0,
        admits: Callable[[InboundMessage], bool] | None = None,
        budget: RateBudget | None = None,
        calls: PlatformCalls = NO_PLATFORM_CALLS,
        answered: Callable[[str], Awaitable[bool]] | None = None,
        latest_conversation: Callable[[str, str, str], Awaitable[str | None]] | None = None,
    ) -> None:
        self.name = name
        self.calls = calls  # what each Web API call came to, for /metrics
        if mode == "http" and not signing_secret:
            raise ValueError(
                "channels.slack.signing_secret is required in http mode (without it nothing "
                "proves a request came from Slack); set SLACK_SIGNING_SECRET"
            )
        # No silent retries: a postMessage retried after a lost answer would post twice.
        self.client = AsyncWebClient(
            token=bot_token,
            base_url=api_base or DEFAULT_API,
            timeout=int(max(1, request_timeout_s)),
        )
        self.client.retry_handlers.clear()
        self._timeout_s = request_timeout_s
        self.mode = mode
        self.limits = SlackLimits(MAX_TEXT_BYTES, edit_interval_s, final_marker=True)
        # a stream's appends are Tier 4, apart from chat.update's Tier 3: they may come faster
        stream_interval_s = min(edit_interval_s, STREAM_INTERVAL_S)
        self._stream_limits = SlackLimits(MAX_TEXT_BYTES, stream_interval_s, final_marker=True)
        self.slots = WorkspaceSlots(
            budget or LocalRateBudget(), updates_per_minute, name, stream_rates
        )
        self.streaming = streaming
        self.streams = Streams(self.client, self._call) if streaming == "native" else None
        self.counts: dict[str, int] = {"posts": 0, "updates": 0, "ratelimited": 0}
        if self.streams is not None:
            self.counts |= {"streams": 0, "appends": 0, "stops": 0}
        self._sent: Recent[tuple[str, str], str] = Recent(REMEMBERED_TEXTS)  # -> text shown
        self._with_buttons: Recent[tuple[str, str], None] = Recent(REMEMBERED_TEXTS)
        self.status = AssistantStatus(self.client, self.slots, agent=agent_view)
        self.ingress = Ingress(
            self.client,
            name=name,
            slots=self.slots,
            status=self.status,
            connect=self.connect,
            mode=mode,
            app_token=app_token,
            signing_secret=signing_secret,
            path=path,
            admits=admits or (lambda message: True),
            answered=answered,
            latest_conversation=latest_conversation,
            agent_view=agent_view,
            streams_ended=self.streams.ended_by_slack if self.streams is not None else None,
        )

    def limits_for(self, chat: ChatRef) -> ChannelLimits:
        """A thread's answers may stream, at the appends' pace; the rest are updated."""
        streams = self.streams is not None and chat.thread_id
        return self._stream_limits if streams else self.limits

    def install(self, app: web.Application) -> None:
        """HTTP mode: Slack's events, commands and interactions arrive at `path`."""
        self.ingress.install(app)

    def health(self) -> Mapping[str, Any]:
        state = {
            "mode": self.mode,
            "streaming": self.streaming,
            "connected": self.ingress.connected,
        }
        return {self.name: state | self.counts}

    def platform_down(self) -> str | None:
        return None if self.ingress.connected else "auth.test or Socket Mode not answered yet"

    async def run(self, inbox: Inbox) -> None:
        # The pool stays open: turns still finishing (a stop's last edits) need it. The app
        # closes it (`aclose`) once they have ended.
        await self.ingress.run(inbox)

    async def aclose(self) -> None:
        """Close the HTTP connection pool (the next call opens a new one)."""
        session, self.client.session = self.client.session, None
        if session is not None:
            await session.close()

    def connect(self) -> None:
        """One connection pool for every call: without one slack_sdk opens a session, and a
        connection, per call. Opened lazily, inside the running event loop."""
        if self.client.session is None or self.client.session.closed:
            timeout = aiohttp.ClientTimeout(total=self._timeout_s)
            self.client.session = aiohttp.ClientSession(timeout=timeout)

    async def send(
        self,
        chat: ChatRef,
        content: OutboundContent,
        *,
        reply_to: str | None = None,
        final: bool = False,
        recipient: str | None = None,
    ) -> MessageHandle:
        text = to_mrkdwn(content.text) or "…"
        if reply_to and reply_to.startswith("ephemeral:") and not chat.chat_id.startswith("D"):
            return await self._send_ephemeral(chat, text, reply_to.removeprefix("ephemeral:"))
        if not final and self.streams is not None:
            streamed = await self.streams.start(chat, content, recipient)
            if streamed is not None:
                self.ingress.joined(chat)
                await self.status.show(chat, "is thinking…")
                return streamed
        args: dict[str, Any] = {
            "channel": chat.chat_id,
            "text": text,
            "thread_ts": chat.thread_id,
            "unfurl_links": False,  # a model-written link must not fetch and show anything
            "unfurl_media": False,
        }
        if content.display:
            args["blocks"] = blocks(text, content.display)
        async with self._call("chat.postMessage", chat, "final" if final else "send", sending=True):
            response = await errors.blocks_or_text(self.client.chat_postMessage, args)
        ts, channel = str(response["ts"]), str(response.get("channel") or chat.chat_id)
        self._sent.put((channel, ts), text)
        self._remember_buttons((channel, ts), content)
        if chat.thread_id:
            self.ingress.joined(chat)
        if not final:
            await self.status.show(chat, "is thinking…")
        return MessageHandle(chat, ts, {"channel": channel})

    async def edit(
        self, handle: MessageHandle, content: OutboundContent, *, final: bool = False
    ) -> None:
        if handle.data.get("ephemeral"):
            raise MessageGone("an ephemeral message cannot be edited")
        chat = handle.chat
        channel = str(handle.data.get("channel") or chat.chat_id)
        text = to_mrkdwn(content.text) or "…"
        key = (channel, handle.message_id)
        streams = self.streams
        stream = streams.get(handle) if streams is not None else None
        try:
            if streams is not None and stream is not None:
                if final:
                    hints = hint_blocks(content.display)
                    streamed = await streams.finish(stream, content, hints)
                else:
                    streamed = await streams.preview(stream, content)
                if streamed:
                    if not final:
                        await self.status.follow(chat, content.text)
                    return
            streamed_once = stream is not None or (streams is not None and key in streams.ended)
            if self._sent.get(key) != text or content.display or stream is not None:
                # `parse` defaults to "client" on chat.update (to "none" on postMessage): our
                # text is mrkdwn already escaped, so Slack must not link `@channel` in it either
                args: dict[str, Any] = {
                    "channel": channel,
                    "ts": handle.message_id,
                    "text": text,
                    "parse": "none",
                }
                if content.display:
                    args["blocks"] = blocks(text, content.display)
                elif key in self._with_buttons or streamed_once:
                    # Slack may keep a message's old blocks on a text-only update: its buttons
                    # (an approval's, once answered), a stream's text and tasks, go with blocks
                    # of the text alone
                    args["blocks"] = blocks(text, ())
                rank: Rank = "final" if final else "preview"
                async with self._call("chat.update", chat, rank, ts=handle.message_id):
                    await errors.blocks_or_text(self.client.chat_update, args)
                self._sent.put(key, text)
                self._remember_buttons(key, content)
            if not final:
                await self.status.follow(chat, content.text)
        finally:
            if final:
                await self.status.show(chat, "")

    def _remember_buttons(self, key: tuple[str, str], content: OutboundContent) -> None:
        if any(hint.get("buttons") for hint in content.display):
            self._with_buttons.put(key, None)
        else:
            self._with_buttons.discard(key)

    async def fetch(
        self, message: InboundMessage, attachment: Attachment, blobs: BlobStore
    ) -> BlobRef:
        self.connect()
        assert self.client.session is not None
        return await files.fetch(self.client, self.client.session, message, attachment, blobs)

    async def send_part(
        self,
        chat: ChatRef,
        part: MediaPart,
        blobs: BlobStore,
        *,
        caption: str | None = None,
        reply_to: str | None = None,
    ) -> MessageHandle:
        """Uploaded into the answer's thread (a DM's answers are not threaded)."""
        _, data = await blobs.get(part.blob.blob_id)
        async with self._call("files.completeUploadExternal", chat, "final", sending=True):
            file_id = await files.upload(
                self.client, chat.chat_id, chat.thread_id, part, data, caption
            )
        return MessageHandle(chat, file_id, {"file": True})

    async def _send_ephemeral(self, chat: ChatRef, text: str, user: str) -> MessageHandle:
        """A reply to a slash command in a channel: only its user sees it."""
        async with self._call("chat.postEphemeral", chat, "final", sending=True):
            response = await self.client.chat_postEphemeral(
                channel=chat.chat_id, user=user, text=text, thread_ts=chat.thread_id
            )
        return MessageHandle(chat, str(response.get("message_ts", "")), {"ephemeral": True})

    @asynccontextmanager
    async def _call(
        self, method: str, chat: ChatRef, rank: Rank, *, ts: str = "", sending: bool = False
    ) -> AsyncIterator[None]:
        """One Web API call inside the workspace budget, its errors as `ChannelError`s."""
        if method in STREAM_METHODS:
            slot = self.slots.stream(method, chat, ts, rank)
        elif method == "chat.update":
            slot = self.slots.update(chat, ts, rank)
        else:
            slot = self.slots.post(chat, rank)
        self.connect()
        try:
            async with slot:
                self.counts[COUNTED.get(method, "posts")] += 1
                try:
                    yield
                except SlackApiError as exc:
                    code = errors.error_code(exc)
                    if code is not None and errors.is_rate_limit(exc, code):
                        wait = errors.retry_after(exc)
                        self.calls.record("slack", method, "rate_limited", retry_after_s=wait)
                    else:
                        self.calls.record("slack", method, "error")
                    raise
                except (TimeoutError, aiohttp.ClientError, SlackClientError, ValueError):
                    self.calls.record("slack", method, "error")
                    raise
                self.calls.record("slack", method, "ok")
        except Busy as exc:
            # Our budget's estimate, not Slack's 429: a preview behind many waiting finals would
            # be told minutes, and its final, which waits its turn in the budget anyway, would
            # give up on so long a pause (the delivery's deadline). Asked again soon instead.
            raise RateLimited(
                min(exc.retry_after, BUSY_RETRY_S), "workspace budget in use"
            ) from None
        except SlackApiError as exc:
            code = errors.error_code(exc)
            if code is None:  # not Slack's JSON: a proxy's page, say; the call may have landed
                raise errors.lost(method, exc, sending) from exc
            if errors.is_rate_limit(exc, code):
                wait = errors.retry_after(exc)
                self.counts["ratelimited"] += 1
                log.warning("Slack ratelimited %s in %s: retry after %ss", method, chat.key, wait)
                # the workspace's budget for the method, for every answer there
                await self.slots.penalize(method, chat, wait)
                raise RateLimited(wait, f"Slack ratelimited {method}") from exc
            if code in errors.REVOKED:
                reason = f"Slack refused the bot token on {method} ({code})"
                raise self.ingress.revoked(reason) from exc
            raise errors.refused(method, code) from exc
        except (TimeoutError, aiohttp.ClientError, SlackClientError, ValueError) as exc:
            raise errors.lost(method, exc, sending) from exc
