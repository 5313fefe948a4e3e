"""`ScheduleDesk`: what the schedule tools, `/schedule` and the admin view do with schedules.

It reads `when` in the user's time zone (the tool's `timezone` argument, which is then kept as
the conversation state's `timezone` setting; else that setting; else `agent.default_timezone`), refuses what would flood a chat (a
recurrence more often than `schedules.min_interval_s`, more than the per-user or
per-conversation count) and keeps the schedule in the store, where any process's runner
(bot/schedules/runner.py) fires it. A schedule made by a tool call is keyed by that call, so a
turn resumed after a crash that runs the call again finds it instead of adding a twin.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from adapters.base import ChatRef
from bot.pipeline.conversation_state import ConversationState
from bot.schedules.settings import SchedulesConfig
from bot.storage.roles import ScheduleRecords
from bot.storage.schedules import ScheduleRow
from bot.storage.turns import chat_record
from tools.base import Missed, ToolContext, ToolError
from tools.builtin.clock import zone_named
from tools.when import WhenError, parse_when

ChatLookup = Callable[[str], Awaitable[ChatRef | None]]
TIMEZONE_SETTING = "timezone"  # the conversation state's setting the user's zone is kept in


def view(row: ScheduleRow) -> dict[str, Any]:
    """A schedule as the model and the admin read it: its next time in its own zone."""
    zone = zone_named(row.timezone)
    shown: dict[str, Any] = {
        "id": row.id,
        "kind": row.kind,
        row.kind: row.body,
        "when": _repeat(row.spec),
        "next": None
        if row.next_at is None
        else datetime.fromtimestamp(row.next_at, zone).isoformat(timespec="minutes"),
        "timezone": row.timezone,
        "status": row.status,
    }
    if row.note:
        shown["note"] = row.note
    return shown


def _repeat(spec: str) -> str:
    """How often, for people: the cron line, `every N s`, or `once`."""
    kind, _, rest = spec.partition(":")
    if kind == "cron":
        return f"cron {rest}"
    if kind == "every":
        return f"every {float(rest.split(':')[0]):g} s"
    return "once"


class ScheduleDesk:
    def __init__(
        self,
        records: ScheduleRecords,
        *,
        chats: ChatLookup,
        states: ConversationState,
        settings: SchedulesConfig,
        default_timezone: str = "UTC",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.records = records
        self.chats = chats
        self.states = states
        self.settings = settings
        self.default_timezone = default_timezone
        self.clock = clock

    async def add(
        self,
        ctx: ToolContext,
        *,
        when: str,
        text: str | None,
        task: str | None,
        if_missed: Missed,
        timezone: str | None,
    ) -> dict[str, Any]:
        limits = self.settings
        if not limits.enabled:
            raise ToolError("scheduled messages are switched off here (schedules.enabled)")
        body = (text if text is not None else task or "").strip()
        if len(body) > limits.max_text_chars:
            raise ToolError(
                f"the message is {len(body)} characters; at most {limits.max_text_chars}"
            )
        key = ctx.conversation_key
        schedule_id = _id_of(ctx)
        known = await self.records.get_schedule(schedule_id)
        if known is not None and known.conversation_key == key:
            return {"schedule": view(known), "message": "already scheduled"}
        chat = await self.chats(key)
        if chat is None:
            raise ToolError("this conversation cannot take scheduled messages (no chat known)")
        state = await self.states.get(key)
        zone = zone_named(timezone or state.settings.get(TIMEZONE_SETTING) or self.default_timezone)
        now = self.clock()
        try:
            parsed = parse_when(when, zone, datetime.fromtimestamp(now, zone))
        except WhenError as exc:
            raise ToolError(str(exc)) from None
        if parsed.min_gap_s < limits.min_interval_s:
            raise ToolError(
                f"{when!r} repeats every {parsed.min_gap_s:g} s; the shortest interval allowed"
                f" here is {limits.min_interval_s:g} s"
            )
        row = ScheduleRow(
            id=schedule_id, conversation_key=key, chat=json.dumps(chat_record(chat)),
            user_id=ctx.user_id, kind="text" if text is not None else "task", body=body,
            spec=parsed.spec, timezone=zone.key, missed=if_missed, status="active",
            next_at=parsed.first_at, occurrence=0, fence=0, lease_until=None, sending=None,
            failures=0, note=None, language=state.settings.get("language"),
            created_at=now, fired_at=None,
        )  # fmt: skip
        if timezone and state.settings.get(TIMEZONE_SETTING) != zone.key:
            # the zone the user named is theirs from now on, for every process (the state)
            await self.states.update(key, lambda s: s.with_setting(TIMEZONE_SETTING, zone.key))
        refused = await self.records.add_schedule(
            row, max_per_user=limits.max_per_user, max_per_conversation=limits.max_per_conversation
        )
        if refused == "user":
            raise ToolError(
                f"this user has {limits.max_per_user} active schedules, the most allowed; cancel one first"
            )
        if refused == "conversation":
            raise ToolError(
                f"this conversation has {limits.max_per_conversation} active schedules, the most allowed; cancel one first"
            )
        return {"schedule": view(row), "message": f"scheduled; first at {view(row)['next']}"}

    async def listing(self, ctx: ToolContext) -> list[dict[str, Any]]:
        return [
            view(row) for row in await self.records.conversation_schedules(ctx.conversation_key)
        ]

    async def cancel(self, ctx: ToolContext, schedule_id: str) -> bool:
        return await self.cancel_in(ctx.conversation_key, schedule_id, "cancelled in the chat")

    async def cancel_in(self, conversation_key: str, schedule_id: str, note: str) -> bool:
        """Cancels the schedule only if it belongs to `conversation_key`."""
        row = await self.records.get_schedule(schedule_id.strip())
        if row is None or row.conversation_key != conversation_key:
            return False
        return await self.records.cancel_schedule(row.id, note)


def _id_of(ctx: ToolContext) -> str:
    """The call's own key when there is one (a re-run finds its schedule), else a fresh one."""
    if ctx.turn_id and ctx.call_id:
        seed = f"{ctx.conversation_key}\n{ctx.turn_id}\n{ctx.call_id}"
        return hashlib.sha256(seed.encode()).hexdigest()[:10]
    return uuid.uuid4().hex[:10]
