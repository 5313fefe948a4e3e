"""Schedule tools: `schedule_message`, `list_schedules`, `cancel_schedule`.

The gateway's `ScheduleDesk` (bot/schedules/desk.py) does the work: it reads `when` in the
user's time zone, applies the limits and keeps the schedule in the store. The caller is always
`ctx`'s user and conversation: no tool takes a user or a conversation as an argument, so a
model cannot schedule into, list or cancel another chat's messages.
"""

from __future__ import annotations

from typing import Any

from tools.base import Missed, ScheduleDesk, ToolContext, ToolError
from tools.registry import tool


def _desk(ctx: ToolContext) -> ScheduleDesk:
    desk = ctx.deps.schedules
    if desk is None:
        raise ToolError("scheduled messages are not available in this deployment")
    return desk


@tool(idempotent=True, destructive=False, open_world=False)  # keyed by the call: no twin
async def schedule_message(
    ctx: ToolContext,
    when: str,
    text: str | None = None,
    task: str | None = None,
    if_missed: Missed = "late",
    timezone: str | None = None,
) -> dict[str, Any]:
    """Schedule a message in this conversation, once or recurring: a fixed text sent as is, or a task you will carry out then (with your tools) and whose answer is posted.

    Args:
        when: a delay ('in 10 minutes'), a time ('at 9', 'tomorrow at 8:30',
            '2026-12-24 18:00') or a recurrence ('every weekday at 9', 'every monday at 17',
            'every 2 hours', or a cron line '0 9 * * 1-5'), in the user's time zone.
        text: the exact message to send (a reminder). Give text or task, not both.
        task: instructions to carry out at that time, e.g. 'list the open orders'.
        if_missed: when the bot was down at the due time: 'late' sends it once, late,
            with a note; 'skip' drops that occurrence.
        timezone: an IANA zone such as 'Europe/Berlin' when the user names one; else theirs.
    """
    if (text is None) == (task is None) or not (text or task or "").strip():
        raise ToolError("give either `text` (sent as is) or `task` (run then), not both or none")
    added = await _desk(ctx).add(
        ctx, when=when, text=text, task=task, if_missed=if_missed, timezone=timezone
    )
    return {"success": True, **added}


@tool(read_only=True, open_world=False)
async def list_schedules(ctx: ToolContext) -> dict[str, Any]:
    """List the scheduled messages of this conversation that are still to come."""
    found = list(await _desk(ctx).listing(ctx))
    return {"schedules": found, "message": f"{len(found)} scheduled" if found else "none scheduled"}


@tool(idempotent=True, open_world=False)
async def cancel_schedule(ctx: ToolContext, schedule_id: str) -> dict[str, Any]:
    """Cancel a scheduled message of this conversation; no later occurrence is sent.

    Args:
        schedule_id: the id list_schedules or schedule_message gave.
    """
    if not await _desk(ctx).cancel(ctx, schedule_id):
        raise ToolError(f"no active schedule {schedule_id!r} here; list_schedules shows them")
    return {"success": True, "cancelled": schedule_id}
