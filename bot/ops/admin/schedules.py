"""The admin view's schedules page: every schedule with its next time, and a cancel button.

Its own module and template (templates/schedules.html), mounted by `AdminView` behind the same
token guard. The cancel is a POST from the page's form: the admin cookie is SameSite=Strict and
the pages allow forms to this origin only, so another site cannot make an admin's browser send it.
"""

from __future__ import annotations

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
        self, records: ScheduleRecords, guard: Callable[[Handler], Handler], page: Page
    ) -> None:
        self.records = records
        self._guard = guard
        self._page = page

    def install(self, app: web.Application) -> None:
        app.router.add_get("/admin/schedules", self._guard(self._list))
        app.router.add_post("/admin/schedules/{schedule_id}/cancel", self._guard(self._cancel))

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
        cancelled = request.query.get("cancelled", "")
        return self._page("schedules.html", schedules=shown, cancelled=cancelled, shown=SHOWN)

    async def _cancel(self, request: web.Request) -> web.StreamResponse:
        schedule_id = request.match_info["schedule_id"]
        if not await self.records.cancel_schedule(schedule_id, "cancelled by an admin"):
            raise web.HTTPNotFound(text=f"no active schedule {schedule_id!r}\n")
        raise web.HTTPSeeOther(f"/admin/schedules?cancelled={schedule_id}")
