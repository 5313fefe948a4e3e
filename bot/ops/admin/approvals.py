"""The admin view's approvals page: the requests waiting for a yes, answered with a form.

`/admin/approvals` lists them; each row posts Allow once, Always allow or Deny to
`/admin/approvals/{id}`. Signed in to the admin view is enough to answer (the admin token holds
every other power over the gateway too); the answer is audited as `admin`. A form's post carries
a token only the signed-in admin's pages hold (`csrf`, derived from the admin token and
compared in constant time), on top of the sign-in cookie's `SameSite=Strict`: another site
cannot make a signed-in browser answer. Deciding, auditing and resuming the turn is the desk's
(bot/approvals/desk.py), as for a press anywhere else.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Protocol

from aiohttp import web

from bot.storage.rows import ApprovalRow

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Guard = Callable[[Handler], Handler]
Page = Callable[..., web.Response]
DECISIONS = ("once", "always", "deny")
WHO = "admin"


class ApprovalConsole(Protocol):
    async def waiting(self) -> list[ApprovalRow]:
        """The pending requests, the soonest to expire first."""
        ...

    async def answer(self, approval_id: str, decision: str, who: str) -> bool:
        """Decide request `approval_id` (its turn goes on); False: it was decided already."""
        ...


class AdminApprovals:
    def __init__(self, console: ApprovalConsole, csrf: str, page: Page) -> None:
        self.console = console
        self._csrf = csrf
        self._page = page

    def install(self, app: web.Application, guard: Guard) -> None:
        app.router.add_get("/admin/approvals", guard(self._list))
        app.router.add_post("/admin/approvals/{approval_id}", guard(self._answer))

    async def _list(self, request: web.Request, decided: str = "") -> web.StreamResponse:
        requests = await self.console.waiting()
        return self._page("approvals.html", requests=requests, csrf=self._csrf, decided=decided)

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        token, decision = form.get("csrf"), form.get("decision")
        if not isinstance(token, str) or not hmac.compare_digest(token, self._csrf):
            raise web.HTTPForbidden(text="this form is not from the admin view; reload it\n")
        if decision not in DECISIONS:
            raise web.HTTPBadRequest(text=f"decision must be one of {', '.join(DECISIONS)}\n")
        approval_id = request.match_info["approval_id"]
        done = await self.console.answer(approval_id, str(decision), WHO)
        if done:
            said = f"Request {approval_id}: {decision}."
        else:
            said = f"Request {approval_id} was answered already (or is unknown): nothing changed."
        return await self._list(request, said)
