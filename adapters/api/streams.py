"""The SSE side of the sessions API: a message's answer streamed, a dropped stream resumed.

A stream attaches to the session's conversation in the event hub *before* its message is handed
to the gateway, so it misses nothing; `id:` is the hub's seq, so `Last-Event-ID` resumes it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from aiohttp import web

from adapters.api import dropped, sse
from adapters.api.base import SessionsChannel, hub_key
from adapters.api.errors import ApiError
from adapters.api.records import ApiMessage
from adapters.base import ChatRef, InboundMessage

log = logging.getLogger(__name__)

Done = Callable[[dict[str, Any]], Awaitable[bool]]
_DROPPED = (
    "message {!r} was dropped from the queue by a stop before the bot took it; send it with a "
    "new client_message_id to have it answered"
)


class SessionStreams:
    def __init__(self, channel: SessionsChannel) -> None:
        self.channel = channel
        self.settings = channel.settings

    async def turn(
        self,
        request: web.Request,
        inbound: InboundMessage,
        record: ApiMessage,
        resume: int | None,
    ) -> web.StreamResponse:
        """A new message or action: recorded, handed on, streamed until it is answered."""
        session_id = record.session_id
        subscriber = sse.SseSubscriber()
        seq, replay, _ = await self.channel.hub.attach(hub_key(session_id), subscriber, resume)
        try:
            record = await self.channel.records.add_api_message(replace(record, seq=seq))
            stop = inbound.command == "stop"
            waiting = await dropped.before_stop(self.channel.records, session_id) if stop else []
            await self.channel.deliver(inbound)
            await dropped.announce(self.channel, session_id, waiting)
            # `/stop` gets no answer of its own: the turn it stops ends with one; nor does an
            # approval's button: the turn it answers goes on in that turn's own message
            approval = inbound.action is not None and inbound.action.answers_approval
            done = self._answered(record, any_answer=stop or approval)
            emit_after = _emit_after(resume, seq)
            return await self._pump(request, subscriber, replay, emit_after, done, quiet=False)
        finally:
            await self.channel.hub.detach(hub_key(session_id), subscriber)

    async def resume(
        self,
        request: web.Request,
        sent: ApiMessage,
        resume: int | None,
        again: InboundMessage | None = None,
    ) -> web.StreamResponse:
        """A message sent again (same client id): answered once, its stream picked up again.

        Frames from the message on are replayed to find its answer, and written only past
        `Last-Event-ID`. If the hub no longer keeps the answer's frames (a restart, a long
        time), the recorded answer is sent as its `message.completed`, with the current seq.
        Without a recorded answer the message (`again`, with its first event id) goes to the
        gateway again: its claim drops it if it was taken, and if the process stopped between
        recording it and handing it over, this is what gets it answered.
        """
        session_id = sent.session_id
        emit_after = resume if resume is not None else sent.seq
        answer = await self.channel.records.api_reply(session_id, sent.message_id)
        ended = answer is not None and answer.status in ("completed", "stopped")
        known = answer.message_id if answer is not None and ended else None
        if known is None and sent.status == "dropped":
            return await self._dropped(request, sent)
        resent = InboundMessage(ChatRef("api", session_id), "", sent.text, "")
        stop = resent.command == "stop"
        done = self._answered(sent, known=known, any_answer=stop)
        subscriber = sse.SseSubscriber()
        after = min(sent.seq, emit_after)
        seq, replay, _ = await self.channel.hub.attach(hub_key(session_id), subscriber, after)
        try:
            emit_after = _emit_after(emit_after, seq)
            if answer is not None and known is not None and not _completes(replay, known):
                replay.append(_completed(answer, seq))  # written even if the client has `seq`
                emit_after = min(emit_after, seq - 1)
            if known is None and again is not None:
                await self.channel.deliver(again)
            return await self._pump(request, subscriber, replay, emit_after, done, quiet=False)
        finally:
            await self.channel.hub.detach(hub_key(session_id), subscriber)

    async def _dropped(self, request: web.Request, sent: ApiMessage) -> web.StreamResponse:
        """A resend of a message a stop dropped: told so again at once, never handed on (its
        event id is claimed). Its `message.dropped` as kept by the hub, or made anew at the
        current seq; without a stream, a `409` `dropped`."""
        if _wants_json(request):
            raise ApiError(409, "dropped", _DROPPED.format(sent.message_id))
        subscriber = sse.SseSubscriber()
        key = hub_key(sent.session_id)
        seq, replay, _ = await self.channel.hub.attach(key, subscriber, sent.seq)
        await self.channel.hub.detach(key, subscriber)
        frame = next((f for f in map(json.loads, replay) if _drops(f, sent)), None)
        response = await sse.open_stream(request)
        try:
            await response.write(sse.event(frame or dropped.event(sent, seq)))
        except ConnectionResetError:
            pass
        return response

    async def follow(
        self, request: web.Request, session_id: str, resume: int | None
    ) -> web.StreamResponse:
        """Every event of the session from now (or after `Last-Event-ID`) until it times out."""
        subscriber = sse.SseSubscriber()
        seq, replay, _ = await self.channel.hub.attach(hub_key(session_id), subscriber, resume)
        try:
            return await self._pump(
                request, subscriber, replay, _emit_after(resume, seq), _never, quiet=True
            )
        finally:
            await self.channel.hub.detach(hub_key(session_id), subscriber)

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
        if not quiet and _wants_json(request):  # a follower (quiet) always streams
            return await self._answer(subscriber, replay, done)
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
            pass  # the client went away; the turn goes on and its answer is recorded
        finally:
            self.channel.streams.discard(subscriber)
        return response

    async def _answer(
        self, subscriber: sse.SseSubscriber, replay: list[str], done: Done
    ) -> web.Response:
        """`Accept: application/json`: no stream, the answer's `message.completed` when done."""
        self.channel.streams.add(subscriber)
        try:
            timeout_s = self.settings.stream_timeout_s
            final = await sse.collect(subscriber, replay, done=done, timeout_s=timeout_s)
        except sse.StreamEnded as ended:
            why = f"{ended.why}; send the same client_message_id again to wait on"
            raise ApiError(504, ended.code, why) from None
        finally:
            self.channel.streams.discard(subscriber)
        if final is None:
            raise ApiError(503, "shutting_down", "the server is stopping; send it again later")
        if final.get("type") == "message.dropped":
            raise ApiError(409, "dropped", _DROPPED.format(final.get("message_id")))
        return web.json_response(final)

    def _answered(
        self, sent: ApiMessage, *, known: str | None = None, any_answer: bool = False
    ) -> Done:
        """True at the `message.completed` of the answer to `sent`: a message replying to it, or
        to a message recorded after it (coalesced into the same turn). The order is the records'
        `position` (the store every process shares), so it holds whichever process took which
        message, and after a restart."""
        answers: set[str] = set() if known is None else {known}

        async def done(frame: dict[str, Any]) -> bool:
            kind, reply_to = frame.get("type"), frame.get("reply_to")
            if kind == "message.dropped" and frame.get("message_id") == sent.message_id:
                return True
            if (
                kind == "message.created"
                and isinstance(reply_to, str)
                and (reply_to == sent.message_id or await self._recorded_after(sent, reply_to))
            ):
                answers.add(frame["message_id"])
            if kind != "message.completed":
                return False
            return any_answer or frame.get("message_id") in answers

        return done

    async def _recorded_after(self, sent: ApiMessage, message_id: str) -> bool:
        """Whether user message `message_id` of `sent`'s session was recorded after `sent`.
        A message never recorded (a `POST …/stop`) is not; neither is one the store cannot find
        now (logged): at worst the stream waits for its own answer until `stream_timeout_s`."""
        try:
            other = await self.channel.records.api_message(sent.session_id, message_id)
        except Exception:
            log.exception("api session %s: looking up message %s", sent.session_id, message_id)
            return False
        return other is not None and other.role == "user" and other.position > sent.position


async def _never(frame: dict[str, Any]) -> bool:
    return False


def _wants_json(request: web.Request) -> bool:
    accept = request.headers.get("Accept", "")
    return "application/json" in accept and "text/event-stream" not in accept


def _emit_after(resume: int | None, seq: int) -> int:
    """Events past this are written. A `Last-Event-ID` beyond the hub's seq means the hub has
    forgotten the session (a restart): its seq began again, so everything new is news."""
    return resume if resume is not None and resume <= seq else seq


def _drops(frame: dict[str, Any], sent: ApiMessage) -> bool:
    return frame.get("type") == "message.dropped" and frame.get("message_id") == sent.message_id


def _completes(replay: list[str], message_id: str) -> bool:
    for encoded in replay:
        frame = json.loads(encoded)
        if frame.get("type") == "message.completed" and frame.get("message_id") == message_id:
            return True
    return False


def _completed(answer: ApiMessage, seq: int) -> str:
    frame = {
        "type": "message.completed",
        "message_id": answer.message_id,
        "text": answer.text,
        "display": [dict(hint) for hint in answer.display],
        "seq": seq,
    }
    if answer.status == "stopped":
        frame["stopped"] = True
    return json.dumps(frame, ensure_ascii=False, separators=(",", ":"))
