"""The HTTP endpoints of the sessions API; docs in the README, schema in adapters/api/openapi.py."""

from __future__ import annotations

import math
import re
import uuid
from typing import Any, Final

from aiohttp import hdrs, web

from adapters.api import bodies, dropped
from adapters.api.base import PREFIX, SessionsChannel
from adapters.api.errors import ApiError, not_found
from adapters.api.openapi import document
from adapters.api.records import ApiMessage, ApiSession
from adapters.api.streams import SessionStreams
from adapters.base import Action, ChatRef, InboundMessage
from adapters.uploads import UploadRefused, receive
from adapters.websocket.protocol import UserText, new_id
from content.parts import Part

SESSION_ID: Final = re.compile(r"s_[0-9a-f]{32}")


class SessionsApi:
    def __init__(self, channel: SessionsChannel) -> None:
        self.channel = channel
        self.settings = channel.settings
        self.streams = SessionStreams(channel)
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
        router.add_post(f"{one}/files", self.upload_file)

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
        shown = [m.public(self.channel.attachments) for m in found]  # links signed now
        body = {"messages": shown, "has_more": has_more}
        return web.json_response(body)

    async def post_message(self, request: web.Request) -> web.StreamResponse:
        session = await self._session(request)
        frame = bodies.user_text(await bodies.json_object(request), self.settings.max_text_chars)
        with self.channel.slots.take(session.key_id):  # before anything is kept
            return await self._message(request, session, frame)

    async def _message(
        self, request: web.Request, session: ApiSession, frame: UserText
    ) -> web.StreamResponse:
        resume = bodies.last_event_id(request)
        # checked first: a malformed attachment is refused even where the id was sent before
        parts = self._parts(session, frame.attachments)
        resent = await self._resent(session, frame.client_message_id)
        if resent is not None:
            again = self._inbound(
                request,
                session,
                resent.message_id,
                _event(resent),
                text=resent.text,
                parts=resent.parts,
            )
            return await self.streams.resume(request, resent, resume, again)
        message_id = frame.client_message_id or new_id("c_")
        event_id = f"api:{session.id}:{frame.client_message_id or uuid.uuid4().hex}"
        inbound = self._inbound(
            request, session, message_id, event_id, text=frame.text, parts=parts
        )
        record = ApiMessage(session.id, message_id, "user", frame.text, "received", parts=parts)
        await self._take_rate(session)
        return await self.streams.turn(request, inbound, record, resume)

    async def post_action(self, request: web.Request) -> web.StreamResponse:
        session = await self._session(request)
        body = await bodies.json_object(request)
        with self.channel.slots.take(session.key_id):  # before anything is kept
            return await self._action(request, session, body)

    async def _action(
        self, request: web.Request, session: ApiSession, body: dict[str, Any]
    ) -> web.StreamResponse:
        frame = bodies.action(body, self.settings.max_text_chars)
        client_id = bodies.client_id(body)
        resume = bodies.last_event_id(request)
        resent = await self._resent(session, client_id)
        if resent is not None:
            again = self._inbound(
                request, session, resent.message_id, _event(resent), action=_pressed(resent)
            )
            return await self.streams.resume(request, resent, resume, again)
        message_id = client_id or new_id("c_")
        event_id = f"api:{session.id}:{client_id or uuid.uuid4().hex}"
        pressed = Action(frame.action_id, frame.value, frame.label, frame.message_id)
        inbound = self._inbound(request, session, message_id, event_id, action=pressed)
        shown = {"action_id": frame.action_id, "value": frame.value, "label": frame.label}
        shown["message_id"] = frame.message_id
        # its text is what the user saw and pressed, as the web socket's transcript shows it
        said = frame.label or frame.value or frame.action_id
        record = ApiMessage(session.id, message_id, "user", said, "received", action=shown)
        await self._take_rate(session)
        return await self.streams.turn(request, inbound, record, resume)

    async def upload_file(self, request: web.Request) -> web.Response:
        """A file for the session's next message: the attachment object to send with it."""
        session = await self._session(request)
        blobs = self.channel.blobs
        if blobs is None:
            raise ApiError(404, "no_files", "this server takes no files (media is not set up)")
        if not request.content_type.startswith("multipart/"):
            raise ApiError(
                415,
                "unsupported_media_type",
                "send the file as multipart/form-data, in a field named `file`",
            )
        await self._take_rate(session)  # an upload counts as a message does
        try:
            blob = await receive(request, blobs, source="api")
        except UploadRefused as exc:
            code = "too_large" if exc.status == 413 else "bad_file"
            raise ApiError(exc.status, code, str(exc)) from None
        attachment = self.channel.uploads.reference(session.id, blob)
        return web.json_response({"attachment": attachment}, status=201)

    def _parts(self, session: ApiSession, attachments: Any) -> tuple[Part, ...]:
        if not attachments:
            return ()
        if self.channel.blobs is None:
            raise ApiError(400, "attachment_invalid", "this server takes no files")
        try:
            return tuple(self.channel.uploads.part(session.id, item) for item in attachments)
        except UploadRefused as exc:
            raise ApiError(exc.status, "attachment_invalid", str(exc)) from None

    async def stop(self, request: web.Request) -> web.Response:
        session = await self._session(request)
        await bodies.json_object(request, optional=True)
        await self._take_rate(session)
        event_id = f"api:{uuid.uuid4().hex}"
        waiting = await dropped.before_stop(self.channel.records, session.id)
        stop = self._inbound(request, session, new_id("c_"), event_id, text="/stop")
        await self.channel.deliver(stop)
        await dropped.announce(self.channel, session.id, waiting)
        return web.json_response({"status": "stop_requested"}, status=202)

    async def follow_events(self, request: web.Request) -> web.StreamResponse:
        session = await self._session(request)
        with self.channel.slots.take(session.key_id):
            return await self.streams.follow(request, session.id, bodies.last_event_id(request))

    # -- the shared steps ---------------------------------------------------------------
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
        request: web.Request,
        session: ApiSession,
        message_id: str,
        event_id: str,
        *,
        text: str = "",
        action: Action | None = None,
        parts: tuple[Part, ...] = (),
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
            parts=parts,
            client=f"key:{session.key_id}",  # a new session is the same client
            # the gateway's own texts (a quota refusal, /stop's note) in the client's language
            language=request.headers.get(hdrs.ACCEPT_LANGUAGE),
        )

    async def _take_rate(self, session: ApiSession) -> None:
        per_minute = self.settings.rate_limit_per_minute
        waited = await self.channel.rates.take(f"api:{session.id}", per_minute)
        if waited > 0:
            wait_s = math.ceil(waited)
            raise ApiError(
                429,
                "rate_limited",
                f"more than {per_minute} messages a minute in this session; "
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


def _event(sent: ApiMessage) -> str:
    """The event id a message with a `client_message_id` was delivered with (the claim's key)."""
    return f"api:{sent.session_id}:{sent.message_id}"


def _pressed(sent: ApiMessage) -> Action | None:
    shown = sent.action
    if shown is None:
        return None
    return Action(
        str(shown.get("action_id", "")),
        shown.get("value"),
        shown.get("label"),
        shown.get("message_id"),
    )


def _public(session: ApiSession) -> dict[str, Any]:
    return {"id": session.id, "user_id": session.user_id, "created_at": session.created_at}
