"""The admin view's read-write part: operators answer the users a person was asked for.

Pages: the handoff list (open ones first, then the rest, searched and paged), a handoff's page
(the transcript, the reply box, Take / Release / Resolve, the audit trail) and its live events
(SSE, read by the console's own script, static/console.js). Every action is a POST carrying
the CSRF token of the page that offered it, from this origin; the desk audits it. Two
operators pressing Take at once: the desk's compare-and-set picks one, the other's page says
who has it (409).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from aiohttp import web

from adapters.base import ChannelError
from bot.handoff.desk import Ending, HandoffDesk
from bot.handoff.model import CLOSED, OPEN, AlreadyTaken, HandoffError, Operator
from bot.storage.roles import AdminViewRecords

log = logging.getLogger(__name__)

PAGE: Final = 25
KEEPALIVE_S: Final = 15.0
NAME_COOKIE: Final = "bot_admin_name"
_NAME = re.compile(r"[^\w .@-]+", re.UNICODE)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Page = Callable[..., web.Response]


def operator_name(value: str | None) -> str:
    """The name an operator signed in with, as users and the audit see it (plain, short)."""
    cleaned = _NAME.sub("", value or "").strip()[:40]
    return cleaned or "admin"


def page_number(request: web.Request) -> int:
    try:
        return max(1, int(request.query.get("page", "1")))
    except ValueError:
        return 1


@dataclass
class OperatorConsole:
    desk: HandoffDesk
    store: AdminViewRecords
    guard: Callable[[Handler], Handler]
    page: Page
    csrf: Callable[[web.Request], str]

    def install(self, app: web.Application) -> None:
        g = self.guard
        app.router.add_get("/admin/handoffs", g(self._list))
        app.router.add_get("/admin/handoffs/{id}", g(self._one))
        app.router.add_get("/admin/handoffs/{id}/events", g(self._events))
        app.router.add_get("/admin/live", g(self._all_events))
        app.router.add_post(
            "/admin/handoffs/{id}/{action:take|release|resolve|reply}", g(self._act)
        )
        app.router.add_post("/admin/take-over", g(self._take_over))

    def _operator(self, request: web.Request) -> Operator:
        name = operator_name(request.cookies.get(NAME_COOKIE))
        return Operator(f"admin:{name}", name)

    async def _form(self, request: web.Request) -> dict[str, str]:
        """The posted form, once its CSRF token and origin are checked."""
        origin = request.headers.get("Origin")
        if origin is not None and origin != f"{request.scheme}://{request.host}":
            raise web.HTTPForbidden(text="a form from another site\n")
        form = {k: v for k, v in (await request.post()).items() if isinstance(v, str)}
        if form.get("csrf") != self.csrf(request):
            raise web.HTTPForbidden(
                text="the form's CSRF token is missing or wrong; reload the page\n"
            )
        return form

    # -- pages ---------------------------------------------------------------------------
    async def _list(self, request: web.Request) -> web.StreamResponse:
        search = request.query.get("q", "").strip()[:200]
        number = page_number(request)
        records = self.desk.records
        opened = await records.list_handoffs(statuses=OPEN, search=search or None, limit=500)
        closed = await records.list_handoffs(
            statuses=CLOSED, search=search or None, limit=PAGE + 1, offset=(number - 1) * PAGE
        )
        return self.page(
            "handoffs.html",
            waiting=[r for r in opened if r.status == "waiting"],
            held=[r for r in opened if r.status == "human"],
            closed=closed[:PAGE],
            more=len(closed) > PAGE,
            page=number,
            q=search,
        )

    async def _one(
        self, request: web.Request, *, status: int = 200, said: str = ""
    ) -> web.Response:
        row = await self.desk.records.get_handoff(request.match_info["id"])
        if row is None:
            raise web.HTTPNotFound(text="no such handoff\n")
        session = await self.desk.context.session(row)
        messages = [
            m for m in await self.store.messages_for_session(session)
            if m.role in ("user", "assistant") and m.content
        ]  # fmt: skip
        events = await self.desk.records.handoff_events(row.id)
        return self.page(
            "handoff.html",
            status=status,
            failed=status >= 400,
            row=row,
            messages=messages[-200:],
            events=events,
            said=said or request.query.get("said", ""),
            me=self._operator(request),
            nonce=uuid.uuid4().hex,  # a form posted twice sends its reply once
        )

    # -- actions -------------------------------------------------------------------------
    async def _act(self, request: web.Request) -> web.StreamResponse:
        form = await self._form(request)
        handoff_id, action = request.match_info["id"], request.match_info["action"]
        me = self._operator(request)
        try:
            if action == "take":
                await self.desk.take(handoff_id, me, via="admin")
            elif action == "reply":
                text = form.get("text", "").strip()
                if not text:
                    return await self._one(request, status=400, said="Write something to send.")
                nonce = form.get("nonce", "")[:80]
                event = f"admin-reply:{handoff_id}:{nonce}" if nonce else None
                await self.desk.reply(handoff_id, me, text[:4000], event_id=event, via="admin")
            else:
                how: Ending = "release" if action == "release" else "resolve"
                await self.desk.end(
                    handoff_id, me, how, via="admin", note=form.get("note", "")[:500]
                )
        except AlreadyTaken as exc:
            return await self._one(request, status=409, said=f"Already taken by {exc.holder}.")
        except HandoffError as exc:
            return await self._one(request, status=409, said=f"{exc}")
        except ChannelError as exc:  # the user's channel refused the reply
            return await self._one(request, status=502, said=f"Not delivered to the user: {exc}")
        raise web.HTTPSeeOther(f"/admin/handoffs/{handoff_id}?said={action}")

    async def _take_over(self, request: web.Request) -> web.StreamResponse:
        form = await self._form(request)
        session = await self.store.get_session(form.get("session_id", ""))
        if session is None:
            raise web.HTTPNotFound(text="no such session\n")
        chat = await self.store.conversation_chat(session.conversation_key)
        if chat is None:
            raise web.HTTPConflict(text="this conversation has no chat to answer in yet\n")
        try:
            row = await self.desk.take_over(
                chat, session.user_id, self._operator(request), via="admin"
            )
        except HandoffError as exc:
            opened = await self.desk.open_for(session.conversation_key)
            if opened is not None:
                raise web.HTTPSeeOther(f"/admin/handoffs/{opened.id}") from None
            raise web.HTTPConflict(text=f"{exc}\n") from None
        raise web.HTTPSeeOther(f"/admin/handoffs/{row.id}?said=take")

    # -- live ----------------------------------------------------------------------------
    async def _events(self, request: web.Request) -> web.StreamResponse:
        return await self._stream(request, request.match_info["id"])

    async def _all_events(self, request: web.Request) -> web.StreamResponse:
        return await self._stream(request, "*")

    async def _stream(self, request: web.Request, topic: str) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"}
        )
        await response.prepare(request)
        await response.write(b"retry: 3000\n\n")
        async with self.desk.feed.subscribe(topic) as events:
            try:
                while True:
                    try:
                        async with asyncio.timeout(KEEPALIVE_S):
                            frame = await events.get()
                    except TimeoutError:
                        await response.write(b": keepalive\n\n")
                        continue
                    kind = json.loads(frame).get("type", "message")
                    await response.write(f"event: {kind}\ndata: {frame}\n\n".encode())
            except ConnectionResetError:  # the browser went away: nothing to tell anyone
                return response
