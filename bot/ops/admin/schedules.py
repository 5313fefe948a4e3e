"""The admin view's schedules page: every schedule with its next time, and a cancel button.

Its own module and template (templates/schedules.html), mounted by `AdminView` behind the same
token guard. A cancel is a POST from the page's form carrying the view's form token (as the
pairing page's decisions do): another site cannot make an admin's browser send one, whatever
the browser does with cookies. The page after a cancel says one fixed text, never the query's.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from bot.schedules.desk import view
from bot.storage.roles import ScheduleRecords

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Page = Callable[..., web.Response]
SHOWN = 200


class AdminSchedules:
    def __init__(
        self,
        records: ScheduleRecords,
        *,
        guard: Callable[[Handler], Handler],
        page: Page,
        form_token: str,
    ) -> None:
        self.records = records
        self._guard = guard
        self._page = page
        self._form_token = form_token

    def install(self, app: web.Application) -> None:
        app.router.add_get("/admin/schedules", self._guard(self._list))
        app.router.add_post("/admin/schedules", self._guard(self._cancel))

    async def _list(self, request: web.Request) -> web.StreamResponse:
        rows = await self.records.recent_schedules(SHOWN)
        shown: list[dict[str, Any]] = [
            view(row)
            | {
                "conversation": row.conversation_key,
                "user": row.user_id,
                "body": row.body,
                "note": row.note,
            }
            for row in rows
        ]
        return self._page(
            "schedules.html",
            schedules=shown,
            cancelled=request.query.get("done") == "cancelled",
            shown=SHOWN,
            form_token=self._form_token,
        )

    async def _cancel(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        token, schedule_id = form.get("form_token"), form.get("schedule_id")
        if not isinstance(token, str) or not hmac.compare_digest(
            token.encode(), self._form_token.encode()
        ):
            raise web.HTTPForbidden(text="the form is not from this admin view; reload it\n")
        if not isinstance(schedule_id, str) or not schedule_id:
            raise web.HTTPBadRequest(text="expected a schedule_id\n")
        if not await self.records.cancel_schedule(schedule_id, "cancelled by an admin"):
            raise web.HTTPNotFound(text="no such active schedule\n")
        raise web.HTTPSeeOther("/admin/schedules?done=cancelled")
