"""The HTTP endpoints of the sessions API; docs in the README, schema in adapters/api/openapi.py."""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Final

from aiohttp import web

from adapters.api import bodies, sse
from adapters.api.channel import PREFIX, ApiChannel, hub_key
from adapters.api.errors import ApiError, not_found
from adapters.api.openapi import document
from adapters.api.records import ApiMessage, ApiSession
from adapters.base import Action, ChatRef, InboundMessage
from adapters.websocket.limits import RateLimiter
from adapters.websocket.protocol import new_id

SESSION_ID: Final = re.compile(r"s_[0-9a-f]{32}")
Done = Callable[[dict[str, Any]], bool]


class SessionsApi:
    def __init__(self, channel: ApiChannel) -> None:
        self.channel = channel
        self.settings = channel.settings
        self.rates = RateLimiter(channel.settings.rate_limit_per_minute)
        self._openapi = document(channel.settings.max_text_chars)

    def add_routes(self, router: web.UrlDispatcher) -> None:
        one = f"{PREFIX}/sessions/{{session_id}}"
        router.add_get(f"{PREFIX}/openapi.json", self.openapi)
        router.add_post(f"{PREFIX}/sessions", self.create_session)
        router.add_get(one, self.get_session)
        router.add_get(f"{one}/messages", self.list_messages)
        router.add_post(f"{one}/messages", self.post_message)
        router.add_get(f"{one}/events", self.follow_events)
        router.add_post(f"{one}/stop", self.stop)
        router.add_post(f"{one}/actions", self.post_action)

    async def openapi(self, request: web.Request) -> web.Response:
        return web.json_response(self._openapi)

    async def create_session(self, request: web.Request) -> web.Response:
        key_id = self._key(request)
        user_id = bodies.session_user(await bodies.json_object(request, optional=True))
        session = ApiSession(id=f"s_{uuid.uuid4().hex}", key_id=key_id, user_id=user_id)
        await self.channel.records.create_api_session(session)
        headers = {"Location": f"{PREFIX}/sessions/{session.id}"}
        return web.json_response(_public(session), status=201, headers=headers)

    async def get_session(self, request: web.Request) -> web.Response:
        return web.json_response(_public(await self._session(request)))

    async def list_messages(self, request: web.Request) -> web.Response:
        session = await self._session(request)
        page = bodies.page(request)
        found = await self.channel.records.api_messages(
            session.id, limit=page.limit + 1, before=page.before, after=page.after
        )
        has_more = len(found) > page.limit
        if has_more:  # the extra one tells; it is beyond the page in the paging direction
            found = found[: page.limit] if page.after is not None else found[1:]
        body = {"messages": [m.public() for m in found], "has_more": has_more}
        return web.json_response(body)

    async def post_message(self, request: web.Request) -> web.StreamResponse:
        session = await self._session(request)
        frame = bodies.user_text(await bodies.json_object(request), self.settings.max_text_chars)
        resume = bodies.last_event_id(request)
        resent = await self._resent(session, frame.client_message_id)
        if resent is not None:
            return await self._resume(request, session, resent, resume)
        message_id = frame.client_message_id or new_id("c_")
        event_id = f"api:{session.id}:{frame.client_message_id or uuid.uuid4().hex}"
        inbound = self._inbound(session, message_id, event_id, text=frame.text)
        record = ApiMessage(session.id, message_id, "user", frame.text, "received")
        return await self._turn(request, session, inbound, record, resume)

    async def post_action(self, request: web.Request) -> web.StreamResponse:
        session = await self._session(request)
        body = await bodies.json_object(request)
        frame = bodies.action(body, self.settings.max_text_chars)
        client_id = bodies.client_id(body)
        resume = bodies.last_event_id(request)
        resent = await self._resent(session, client_id)
        if resent is not None:
            return await self._resume(request, session, resent, resume)
        message_id = client_id or new_id("c_")
        event_id = f"api:{session.id}:{client_id or uuid.uuid4().hex}"
        pressed = Action(frame.action_id, frame.value, frame.label, frame.message_id)
        inbound = self._inbound(session, message_id, event_id, action=pressed)
        shown = {"action_id": frame.action_id, "value": frame.value, "label": frame.label}
        shown["message_id"] = frame.message_id
        record = ApiMessage(session.id, message_id, "user", "", "received", action=shown)
        return await self._turn(request, session, inbound, record, resume)

    async def stop(self, request: web.Request) -> web.Response:
        session = await self._session(request)
        await bodies.json_object(request, optional=True)
        self._take_rate(session)
        event_id = f"api:{uuid.uuid4().hex}"
        await self.channel.deliver(self._inbound(session, new_id("c_"), event_id, text="/stop"))
        return web.json_response({"status": "stop_requested"}, status=202)

    async def follow_events(self, request: web.Request) -> web.StreamResponse:
        session = await self._session(request)
        resume = bodies.last_event_id(request)
        return await self._stream(
            request, session, resume, emit_after=resume, done=lambda frame: False, quiet=True
        )

    # -- the shared steps ---------------------------------------------------------------
    async def _turn(
        self,
        request: web.Request,
        session: ApiSession,
        inbound: InboundMessage,
        record: ApiMessage,
        resume: int | None,
    ) -> web.StreamResponse:
        """Take a new message or action: record it, hand it on, stream the session to its answer."""
        self._take_rate(session)
        subscriber = sse.SseSubscriber()
        seq, replay = await self.channel.hub.attach(hub_key(session.id), subscriber, resume)
        try:
            record = replace(record, seq=seq)
            await self.channel.records.add_api_message(record)
            await self.channel.deliver(inbound)
            done = self._answered(session.id, record.message_id)
            emit_after = resume if resume is not None else seq
            return await self._pump(request, subscriber, replay, emit_after, done, quiet=False)
        finally:
            await self.channel.hub.detach(hub_key(session.id), subscriber)

    async def _resume(
        self, request: web.Request, session: ApiSession, sent: ApiMessage, resume: int | None
    ) -> web.StreamResponse:
        """A message sent again (same client id): answered once, its stream picked up again."""
        emit_after = resume if resume is not None else sent.seq
        done = self._answered(session.id, sent.message_id)
        return await self._stream(
            request, session, min(sent.seq, emit_after), emit_after=emit_after, done=done
        )

    async def _stream(
        self,
        request: web.Request,
        session: ApiSession,
        resume_after: int | None,
        *,
        emit_after: int | None,
        done: Done,
        quiet: bool = False,
    ) -> web.StreamResponse:
        subscriber = sse.SseSubscriber()
        seq, replay = await self.channel.hub.attach(hub_key(session.id), subscriber, resume_after)
        try:
            after = emit_after if emit_after is not None else seq
            return await self._pump(request, subscriber, replay, after, done, quiet=quiet)
        finally:
            await self.channel.hub.detach(hub_key(session.id), subscriber)

    async def _pump(
        self,
        request: web.Request,
        subscriber: sse.SseSubscriber,
        replay: list[str],
        emit_after: int,
        done: Done,
        *,
        quiet: bool,
    ) -> web.StreamResponse:
        response = await sse.open_stream(request)
        self.channel.streams.add(subscriber)
        try:
            await sse.pump(
                response,
                subscriber,
                replay,
                emit_after=emit_after,
                done=done,
                timeout_s=self.settings.stream_timeout_s,
                keepalive_s=self.settings.keepalive_s,
                quiet_timeout=quiet,
            )
        except ConnectionResetError:
            pass  # the client went away; the turn goes on, its answer is recorded
        finally:
            self.channel.streams.discard(subscriber)
        return response

    def _answered(self, session_id: str, message_id: str) -> Done:
        """True at the `message.completed` of the answer to `message_id`: a message replying to
        it, or to a message taken after it (coalesced into the same turn)."""
        mine = self.channel.arrival(session_id, message_id)
        answers: set[str] = set()

        def done(frame: dict[str, Any]) -> bool:
            kind, reply_to = frame.get("type"), frame.get("reply_to")
            if kind == "message.created" and isinstance(reply_to, str):
                later = self.channel.arrival(session_id, reply_to)
                if reply_to == message_id or (mine is not None and (later or 0) > mine):
                    answers.add(frame["message_id"])
            return kind == "message.completed" and frame.get("message_id") in answers

        return done

    async def _resent(self, session: ApiSession, client_id: str | None) -> ApiMessage | None:
        if client_id is None:
            return None
        known = await self.channel.records.api_message(session.id, client_id)
        if known is not None and known.role != "user":
            raise ApiError(
                409, "conflict", f"client_message_id {client_id!r} is the id of a bot message"
            )
        return known

    def _inbound(
        self,
        session: ApiSession,
        message_id: str,
        event_id: str,
        *,
        text: str = "",
        action: Action | None = None,
    ) -> InboundMessage:
        return InboundMessage(
            chat=ChatRef(channel=self.channel.name, chat_id=session.id),
            # Scoped by key: two clients' user "42" are two people.
            user_id=f"{session.key_id}:{session.user_id or session.id}",
            text=text,
            event_id=event_id,
            message_id=message_id,
            mentioned=True,
            action=action,
        )

    def _take_rate(self, session: ApiSession) -> None:
        if not self.rates.take(session.id):
            wait_s = math.ceil(self.rates.wait_s(session.id))
            raise ApiError(
                429,
                "rate_limited",
                f"more than {self.rates.per_minute} messages a minute in this session; "
                f"send again in {wait_s} s (the same client_message_id is answered once)",
                {"Retry-After": str(wait_s)},
            )

    def _key(self, request: web.Request) -> str:
        key_id = self.channel.keys.owner(request.headers.get("Authorization"))
        if key_id is None:
            raise ApiError(
                401,
                "unauthorized",
                "send a configured API key as 'Authorization: Bearer <key>'",
                {"WWW-Authenticate": 'Bearer realm="api"'},
            )
        return key_id

    async def _session(self, request: web.Request) -> ApiSession:
        key_id = self._key(request)
        session_id = request.match_info["session_id"]
        if not SESSION_ID.fullmatch(session_id):
            raise not_found()
        session = await self.channel.records.api_session(session_id)
        if session is None or session.key_id != key_id:
            raise not_found()
        return session


def _public(session: ApiSession) -> dict[str, Any]:
    return {"id": session.id, "user_id": session.user_id, "created_at": session.created_at}
