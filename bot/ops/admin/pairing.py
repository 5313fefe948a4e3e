"""The admin view's pairing section: `/admin/pairing` lists pending codes; Approve / Deny post back.

Behind the admin view's own guard (the token, loopback-only, the sign-in throttle). A POST also
carries the form token the page was rendered with (an HMAC of the admin token, so only a page
from this server has it): with the `SameSite=Strict` cookie, a form on another site cannot make
a signed-in admin's browser approve anyone. The decision is the store's (bot/pipeline/pairing.py
`decide`), the sender is told by the serving processes' `PairingNotices`, woken here at once.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from bot.pipeline.pairing_codes import PairingSettings, decide
from bot.storage.roles import PairingRecords

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Guard = Callable[[Handler], Handler]
Page = Callable[..., web.Response]  # (template, *, status, **values) → the rendered page
SHOWN = 100  # rows of each list
DONE = {"approved": "Approved: the sender is told.", "denied": "Denied."}


@dataclass(frozen=True, slots=True)
class PairingDesk:
    """What the section needs of the running app."""

    records: PairingRecords
    settings: PairingSettings
    decided: Callable[[], None]  # an approval to tell: wakes this process's notices


class PairingPage:
    def __init__(self, desk: PairingDesk, *, guard: Guard, page: Page, form_token: str) -> None:
        self.desk = desk
        self._guard = guard
        self._page = page
        self._form_token = form_token

    def install(self, app: web.Application) -> None:
        app.router.add_get("/admin/pairing", self._guard(self._list))
        app.router.add_post("/admin/pairing", self._guard(self._decide))

    async def _list(self, request: web.Request) -> web.StreamResponse:
        # what the redirect after a decision says: one of two fixed texts, never the query's
        notice = DONE.get(request.query.get("done", ""), "")
        return await self._render(notice=notice)

    async def _render(self, *, notice: str = "", status: int = 200) -> web.Response:
        records, now = self.desk.records, time.time()
        values: dict[str, Any] = {
            "pending": await records.pairing_rows("pending", now=now, limit=SHOWN),
            "approved": await records.pairing_rows("approved", now=now, limit=SHOWN),
            "form_token": self._form_token,
            "notice": notice,
            "now": now,
        }
        return self._page("pairing.html", status=status, **values)

    async def _decide(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        token, code, decision = form.get("form_token"), form.get("code"), form.get("decision")
        if not isinstance(token, str) or not hmac.compare_digest(
            token.encode(), self._form_token.encode()
        ):
            raise web.HTTPForbidden(text="the form is not from this admin view; reload it\n")
        if not isinstance(code, str) or decision not in ("approve", "deny"):
            raise web.HTTPBadRequest(text="expected a code and decision=approve|deny\n")
        row = await decide(
            self.desk.records,
            code,
            approve=decision == "approve",
            by="admin view",
            settings=self.desk.settings,
        )
        if row is None:
            return await self._render(
                notice=f"No pending code {code!r} (expired, decided, or mistyped).", status=404
            )
        if row.status == "approved":
            self.desk.decided()
        raise web.HTTPSeeOther(f"/admin/pairing?done={row.status}")
