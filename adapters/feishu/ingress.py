"""Events in: the long connection (default) or HTTP callbacks on the gateway's web server.

`run` first proves the app's credentials by fetching the tenant token: a refused secret is
logged once and ends the channel (not the process; restarting cannot fix it). Then it learns the
bot's open_id (to tell its mentions in groups) and receives until cancelled. Every event is
handed to a task of our own TaskGroup and acknowledged at once (Feishu waits 3 s, then retries
for hours); the gateway's durable dedup drops the retries that still come.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Literal

from aiohttp import web

from adapters.base import ChannelError, InboundMessage, Inbox, OutboundContent
from adapters.feishu.api import CredentialsRefused
from adapters.feishu.longconn import LongConnection
from adapters.feishu.normalize import Unsupported, normalize
from adapters.feishu.sdk import HttpMethod
from adapters.feishu.webhook import CallbackVerifier, read_callback
from adapters.history import Claims
from adapters.telegram.recent import Recent

if TYPE_CHECKING:
    from adapters.feishu.channel import FeishuChannel

log = logging.getLogger(__name__)

REMEMBERED_EVENTS = 4096  # event ids seen here: a retry is dropped before it is parsed again


class Ingress:
    def __init__(
        self,
        channel: FeishuChannel,
        *,
        mode: Literal["websocket", "webhook"],
        app_secret: str,
        encrypt_key: str | None,
        verification_token: str | None,
        path: str,
        claims: Claims | None = None,
    ) -> None:
        self.channel = channel
        self._claims = claims  # durable: a redelivery after a restart is declined once too
        self.mode = mode
        self._path = path
        self._verifier = (
            CallbackVerifier(encrypt_key, verification_token)
            if encrypt_key and verification_token
            else None
        )
        self._long = LongConnection(
            app_id=channel.api.app_id, app_secret=app_secret, base_url=channel.base_url
        )
        self._group: asyncio.TaskGroup | None = None
        self._inbox: Inbox | None = None
        self._bot_open_id = ""
        self._events: Recent[str, None] = Recent(REMEMBERED_EVENTS)
        self._declined: Recent[str, None] = Recent(REMEMBERED_EVENTS)
        self.stopped_reason: str | None = None

    @property
    def connected(self) -> bool:
        return self._long.connected if self.mode == "websocket" else self._group is not None

    def install(self, app: web.Application) -> None:
        if self.mode == "webhook":
            app.router.add_post(self._path, self._on_callback)

    async def run(self, inbox: Inbox) -> None:
        api = self.channel.api
        try:
            await api.token()
        except CredentialsRefused as exc:
            if self.stopped_reason is None:
                log.error("channel feishu stops: %s", exc)  # once: a restart cannot fix it
            self.stopped_reason = str(exc)
            return
        try:
            bot = await api.call(
                HttpMethod.GET, "/open-apis/bot/v3/info", what="bot info", field="bot"
            )
            self._bot_open_id = str(bot.get("open_id", ""))
            log.info("Feishu: %s (%s)", bot.get("app_name", api.app_id), self.mode)
        except ChannelError as exc:
            log.warning("Feishu bot info not available (%s): any mention in a group counts", exc)
        try:
            async with asyncio.TaskGroup() as group:
                self._group, self._inbox = group, inbox
                if self.mode == "websocket":
                    await self._long.run(self.feed_threadsafe)
                else:
                    await asyncio.get_running_loop().create_future()
        finally:
            self._group = self._inbox = None

    async def feed_threadsafe(self, payload: dict[str, Any]) -> bool:
        """From the long connection (already on our loop): a task of our own, then return.
        False when not taken (stopping): the event must not be acknowledged."""
        return self._spawn(payload)

    def _spawn(self, payload: dict[str, Any]) -> bool:
        group = self._group
        if group is None:
            return False
        event_id = str((payload.get("header") or {}).get("event_id", ""))
        if event_id in self._events:
            return True  # a retry of an event already taken
        feeding = self._feed(payload)
        try:
            group.create_task(feeding)
        except RuntimeError:  # the group is shutting down
            feeding.close()
            return False
        if event_id:
            self._events.put(event_id, None)
        return True

    async def _on_callback(self, request: web.Request) -> web.Response:
        verifier = self._verifier
        if verifier is None:
            return web.json_response({"msg": "unauthorized"}, status=401)
        payload = await read_callback(request, verifier)
        if isinstance(payload, web.Response):
            return payload
        if payload.get("type") == "url_verification":
            return web.json_response({"challenge": payload.get("challenge", "")})
        if not self._spawn(payload):  # not running yet: Feishu delivers it again later
            verifier.forget(request.headers)  # and that delivery is no replay
            return web.json_response({"msg": "starting"}, status=503)
        return web.json_response({})

    async def _feed(self, payload: dict[str, Any]) -> None:
        try:
            inbound = normalize(payload, self._bot_open_id, self.channel.name)
            if isinstance(inbound, Unsupported):
                await self._decline(inbound)
            elif inbound is not None and self._inbox is not None:
                self.channel.groups.put(inbound.chat.chat_id, inbound.is_group)
                if inbound.chat.thread_id and inbound.message_id:
                    self.channel.threads.put(inbound.chat.thread_id, inbound.message_id)
                await self._inbox(inbound)
        except Exception:
            log.exception("handling a Feishu event failed")

    async def _decline(self, unsupported: Unsupported) -> None:
        """The gateway never sees these, so its guards apply here: the policy, each message once."""
        message: InboundMessage = unsupported.message
        if message.event_id in self._declined or not self.channel.admits(message):
            return
        self._declined.put(message.event_id, None)
        if self._claims is not None and not await self._claims.claim(
            f"declined:{message.event_id}"
        ):
            return  # declined before a restart
        content = OutboundContent(unsupported.reply)
        await self.channel.send(message.chat, content, reply_to=message.message_id, final=True)
