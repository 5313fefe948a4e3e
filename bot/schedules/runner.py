"""`ScheduleRunner`: each process's loop that fires due schedules, each occurrence exactly once.

Every process runs one. It claims due rows in the store (bot/storage/schedules.py: one UPDATE
moves each row's fence on and leases it), fires them, and settles each with its fence: the next
due time, or done. Only the fence holder can settle, so a process that stalled past its lease
and was taken over writes nothing more.

How an occurrence goes out, and what a takeover (the lease ran out: the process died while
firing) does with an occurrence already in flight (`sending` names it):
- a fixed text on a channel whose message ids are the gateway's own (the web socket, the API):
  the handle is reserved and recorded before the message is posted, so a takeover posts the
  same message again (the client shows one) — exactly once either way;
- a fixed text elsewhere: `sending` is recorded, then the platform is asked once; a takeover
  that finds it cannot know whether the platform took it, and does not ask again (at most once,
  as `DeliveryUncertain` says everywhere in the gateway), logging it;
- a task: it enters the gateway as a message of the user with the event id
  `schedule:<id>:<occurrence>`, so the gateway's durable dedup runs it once, a takeover's
  second hand-over included; its turn (placeholder, coordinator with the conversation
  persona's tools, answer) is the conversation's normal one, resumed by the turn machinery
  if its process dies.
Missed occurrences (the bot was down): the next due time is computed from now, never from the
missed one, so downtime yields at most one late occurrence per schedule — sent with a note, or
skipped, as the schedule says. A schedule whose channel is gone, or whose sends fail
`max_failures` times in a row (a blocked bot, a deleted chat), or whose author the access
policy no longer admits there, is disabled.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from adapters.base import (
    Channel,
    ChannelError,
    ChatRef,
    DeliveryUncertain,
    InboundMessage,
    MessageHandle,
    NamesItsMessages,
    OutboundContent,
    RateLimited,
)
from bot.schedules.settings import SchedulesConfig
from bot.storage.base import StorageError
from bot.storage.roles import ScheduleRecords
from bot.storage.schedules import ScheduleRow, Settle
from bot.storage.turns import chat_from_record, handle_from_record, handle_record
from content.texts import t
from tools.when import next_at

log = logging.getLogger(__name__)

Inbox = Callable[[InboundMessage], Awaitable[None]]
EVENT_PREFIX = "schedule:"
RETRY_S = 60.0  # a failed send is tried again after this (up to `max_failures` in a row)


class ScheduleRunner:
    def __init__(
        self,
        records: ScheduleRecords,
        *,
        channels: Mapping[str, Channel],
        inbox: Inbox,
        settings: SchedulesConfig,
        language: str,
        admits: Callable[[InboundMessage], bool] = lambda message: True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`inbox`: the gateway's (tasks enter as messages); `language`: the gateway's default,
        for the note on a late one where the conversation's is not known; `admits`: the access
        policy (a schedule of a user no longer allowed there is disabled, not sent)."""
        self.records = records
        self.channels = channels
        self.inbox = inbox
        self.settings = settings
        self.language = language
        self.admits = admits
        self.clock = clock

    async def run(self) -> None:
        """Until cancelled: claim what is due, fire it, sleep until the next is due (or poll)."""
        settings = self.settings
        while True:
            try:
                claimed = await self.records.claim_due_schedules(settings.batch, settings.lease_s)
            except StorageError as exc:
                log.warning("schedules: cannot claim due ones: %s", exc)
                await asyncio.sleep(settings.poll_s * 4)
                continue
            if claimed:
                await self.fire_all(claimed)
                if len(claimed) == settings.batch:
                    continue  # more may be due right now
            await asyncio.sleep(await self._idle_s())

    async def _idle_s(self) -> float:
        try:
            wait = await self.records.next_schedule_in()
        except StorageError:
            wait = None
        poll = self.settings.poll_s
        return poll if wait is None else min(poll, max(wait, 0.01))

    async def fire_all(self, rows: list[ScheduleRow]) -> None:
        """Fire claimed rows, `concurrency` at a time, keeping their leases while they run.

        Each group is marked in flight in one transaction, sent at once, and settled in one:
        the store commits twice a group, not twice a message. Marking a group that is sent at
        once right after says what marking each row just before its send would: these sends
        are in flight together either way."""
        held = {row.id: row.fence for row in rows}
        async with asyncio.TaskGroup() as group:
            keeper = group.create_task(self._keep_leases(held))
            step = self.settings.concurrency
            for i in range(0, len(rows), step):
                chunk = rows[i : i + step]
                try:
                    await self._fire_group(chunk)
                except StorageError as exc:  # their leases run out, and a process tries again
                    log.warning("schedules: storage failed while firing %d: %s", len(chunk), exc)
                for row in chunk:
                    held.pop(row.id, None)
            keeper.cancel()

    async def _keep_leases(self, held: dict[str, int]) -> None:
        lease = self.settings.lease_s
        while held:
            await asyncio.sleep(lease / 3)
            try:
                kept = await self.records.extend_schedule_leases(list(held.items()), lease)
            except StorageError as exc:
                log.warning("schedules: leases not extended: %s", exc)
                continue
            for schedule_id in set(held) - kept:
                held.pop(schedule_id, None)

    async def _fire_group(self, rows: list[ScheduleRow]) -> None:
        now = self.clock()
        shots = [self._plan(row, now) for row in rows]
        marks = [(s.row.id, s.row.fence, json.dumps(s.mark)) for s in shots if s.mark is not None]
        marked = await self.records.schedules_sending(marks) if marks else set()
        lost = {schedule_id for schedule_id, _, _ in marks} - marked
        for schedule_id in lost:
            log.warning("schedule %s: taken over by another process; it fires it", schedule_id)
        live = [s for s in shots if s.row.id not in lost]
        settles = await asyncio.gather(*(self._shoot(s, now) for s in live))
        settled = await self.records.settle_schedules([x for x in settles if x is not None])
        log.debug("schedules: %d of %d claimed settled here", len(settled), len(rows))

    def _plan(self, row: ScheduleRow, now: float) -> _Shot:
        """What to do with a claimed row; `mark`: the in-flight record to write before sending."""
        due = row.next_at if row.next_at is not None else now
        chat = chat_from_record(json.loads(row.chat))
        channel = self.channels.get(chat.channel) if chat is not None else None
        shot = _Shot(row, chat, channel, due, late=now - due > self.settings.late_after_s)
        if chat is None or channel is None:
            shot.action = "disable"
            shot.note = "its channel is not configured any more"
            return shot
        if not self.admits(self._message(row, chat, "")):
            shot.action = "disable"
            shot.note = "its author is not allowed in this chat any more"
            return shot
        sending = json.loads(row.sending) if row.sending else None
        if sending and sending.get("occurrence") == row.occurrence:  # a takeover
            record = sending.get("handle")
            shot.handle = handle_from_record(record) if isinstance(record, dict) else None
            shot.action = "repost" if shot.handle is not None or row.kind == "task" else "uncertain"
            return shot
        if shot.late and row.missed == "skip":
            shot.action = "skip"
            return shot
        shot.mark = {"occurrence": row.occurrence}
        if row.kind == "text" and isinstance(channel, NamesItsMessages):
            shot.handle = channel.reserve(chat, None)
            shot.mark["handle"] = handle_record(shot.handle)
        return shot

    async def _shoot(self, shot: _Shot, now: float) -> Settle | None:
        """Send one planned occurrence (or not); how its row settles."""
        row = shot.row
        if shot.action == "disable":
            log.warning("schedule %s disabled: %s", row.id, shot.note)
            return self._settle(row, None, "disabled", note=shot.note)
        if shot.action == "skip":
            log.info(
                "schedule %s: occurrence %d skipped (due %.0f s ago)",
                row.id,
                row.occurrence,
                now - shot.due,
            )
            return self._settle(
                row, now, "active", note="an occurrence missed while down was skipped"
            )
        if shot.action == "uncertain":
            log.warning(
                "schedule %s: occurrence %d was being sent by a process that died; the platform"
                " may have it, so it is not sent again",
                row.id,
                row.occurrence,
            )
            return self._settle(row, max(now, shot.due), "active")
        try:
            await self._send(shot)
        except RateLimited as exc:
            return self._retry(row, now + exc.retry_after, failures=row.failures, why=str(exc))
        except ChannelError as exc:  # a deleted chat, a bot blocked or removed ...
            failures = row.failures + 1
            if failures >= self.settings.max_failures:
                log.warning("schedule %s disabled after %d failed sends: %s", row.id, failures, exc)
                return self._settle(
                    row, None, "disabled", note=f"sending failed {failures} times: {exc}"[:300]
                )
            return self._retry(row, now + RETRY_S, failures=failures, why=str(exc))
        except Exception:  # a bug, or the inbox refused (TryLater): the lease runs out, retried
            log.exception("schedule %s: firing failed", row.id)
            return None
        return self._settle(row, max(now, shot.due), "active")

    async def _send(self, shot: _Shot) -> None:
        row, chat, channel = shot.row, shot.chat, shot.channel
        assert chat is not None and channel is not None  # planned as "disable" otherwise
        if row.kind == "task":
            await self._hand_over(row, chat, shot.late, shot.due)
            return
        content = OutboundContent(self._text(row, shot.late, shot.due))
        if shot.handle is not None and isinstance(channel, NamesItsMessages):
            await channel.post(shot.handle, content)  # a takeover posts the same message again
            await channel.edit(shot.handle, content, final=True)
            return
        try:
            await channel.send(chat, content, final=True)
        except DeliveryUncertain as exc:  # it may have landed: never a second copy
            log.warning("schedule %s: send uncertain, not repeated: %s", row.id, exc)

    async def _hand_over(self, row: ScheduleRow, chat: ChatRef, late: bool, due: float) -> None:
        """The task as a message of its author: the gateway claims its event id once."""
        language = row.language or self.language
        text = t(language, "schedule.task_prompt", task=row.body)
        if late:
            text = f"{text}\n{t(language, 'schedule.task_late', due=self._local(row, due))}"
        await self.inbox(self._message(row, chat, text))

    @staticmethod
    def _message(row: ScheduleRow, chat: ChatRef, text: str) -> InboundMessage:
        """The occurrence as a message of its author (a task's turn; the access check)."""
        return InboundMessage(
            chat=chat,
            user_id=row.user_id,
            text=text,
            event_id=f"{EVENT_PREFIX}{row.id}:{row.occurrence}",
            mentioned=True,  # addressed to the bot, also in a group
            language=row.language,
        )

    def _text(self, row: ScheduleRow, late: bool, due: float) -> str:
        if not late:
            return row.body
        note = t(row.language or self.language, "schedule.late_note", due=self._local(row, due))
        return f"{note}\n{row.body}"

    @staticmethod
    def _local(row: ScheduleRow, due: float) -> str:
        return datetime.fromtimestamp(due, ZoneInfo(row.timezone)).strftime("%Y-%m-%d %H:%M")

    def _retry(self, row: ScheduleRow, at: float, *, failures: int, why: str) -> Settle:
        log.warning("schedule %s: send failed (%s); trying again later", row.id, why)
        return Settle(row.id, row.fence, at, "active", row.occurrence, failures, why[:300])

    def _settle(
        self, row: ScheduleRow, after: float | None, status: str, *, note: str | None = None
    ) -> Settle:
        """The occurrence is done (sent or skipped): on to the first occurrence after `after`
        (now, or the due time if later), never to one already past, so no catch-up burst; and
        never sooner than half the minimum interval after this one, so no runaway."""
        following = None
        if after is not None and status == "active":
            zone = ZoneInfo(row.timezone)
            following = next_at(row.spec, zone, after)
            floor = (row.next_at or 0) + self.settings.min_interval_s / 2
            if following is not None and following < floor and not row.spec.startswith("at:"):
                following = next_at(row.spec, zone, floor)
        if status == "active" and following is None:
            status = "done"
        fired = row.occurrence + (status != "disabled")  # fired or skipped
        return Settle(row.id, row.fence, following, status, fired, 0, note, self.clock())


@dataclass(slots=True)
class _Shot:
    """One claimed row's plan: what to do, where, and the in-flight record to write first."""

    row: ScheduleRow
    chat: ChatRef | None
    channel: Channel | None
    due: float
    late: bool
    action: str = "send"  # send | repost | uncertain | skip | disable
    handle: MessageHandle | None = None
    mark: dict[str, object] | None = None
    note: str | None = None  # why it is disabled
