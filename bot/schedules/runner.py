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
`max_failures` times in a row (a blocked bot, a deleted chat), is disabled.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
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
from bot.storage.schedules import ScheduleRow
from bot.storage.turns import chat_from_record, handle_from_record, handle_record
from content.texts import t
from tools.when import next_at

log = logging.getLogger(__name__)

Inbox = Callable[[InboundMessage], Awaitable[None]]
EVENT_PREFIX = "schedule:"
RETRY_S = 60.0  # a failed send is tried again after this (up to `max_failures` in a row)


class _Lost(Exception):
    """The row's fence moved on: another process holds this occurrence now."""


class ScheduleRunner:
    def __init__(
        self,
        records: ScheduleRecords,
        *,
        channels: Mapping[str, Channel],
        inbox: Inbox,
        settings: SchedulesConfig,
        language: str,
        clock: Callable[[], float] = time.time,
        on_fired: Callable[[ScheduleRow, float], None] | None = None,
    ) -> None:
        """`inbox`: the gateway's (tasks enter as messages); `language`: the gateway's default,
        for the note on a late one where the conversation's is not known; `on_fired`: told of
        each sent occurrence and how late it went out (seconds), for metrics and benchmarks."""
        self.records = records
        self.channels = channels
        self.inbox = inbox
        self.settings = settings
        self.language = language
        self.clock = clock
        self.on_fired = on_fired
        self._slots = asyncio.Semaphore(settings.concurrency)

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
        """Fire claimed rows, a bounded number at once, keeping their leases while they run."""
        pending = {row.id: row.fence for row in rows}
        async with asyncio.TaskGroup() as group:
            keeper = group.create_task(self._keep_leases(pending))
            fires = [group.create_task(self._fire_one(row, pending)) for row in rows]
            await asyncio.gather(*fires)
            keeper.cancel()

    async def _keep_leases(self, pending: dict[str, int]) -> None:
        lease = self.settings.lease_s
        while pending:
            await asyncio.sleep(lease / 3)
            for schedule_id, fence in list(pending.items()):
                try:
                    if not await self.records.extend_schedule_lease(schedule_id, fence, lease):
                        pending.pop(schedule_id, None)
                except StorageError as exc:
                    log.warning("schedules: lease of %s not extended: %s", schedule_id, exc)

    async def _fire_one(self, row: ScheduleRow, pending: dict[str, int]) -> None:
        async with self._slots:
            try:
                await self._fire(row)
            except _Lost:
                log.warning("schedule %s: taken over by another process; it fires it", row.id)
            except StorageError as exc:  # the lease runs out, and a process tries again
                log.warning("schedule %s: storage failed while firing: %s", row.id, exc)
            except Exception:
                log.exception("schedule %s: firing failed", row.id)
            finally:
                pending.pop(row.id, None)

    async def _fire(self, row: ScheduleRow) -> None:
        now = self.clock()
        due = row.next_at if row.next_at is not None else now
        chat = chat_from_record(json.loads(row.chat))
        channel = self.channels.get(chat.channel) if chat is not None else None
        if chat is None or channel is None:
            await self._settle(row, None, "disabled", note="its channel is not configured any more")
            return
        sending = json.loads(row.sending) if row.sending else None
        in_flight = sending if sending and sending.get("occurrence") == row.occurrence else None
        late = now - due > self.settings.late_after_s
        if in_flight is None and late and row.missed == "skip":
            log.info(
                "schedule %s: occurrence %d skipped (due %.0f s ago)",
                row.id,
                row.occurrence,
                now - due,
            )
            await self._settle(
                row, now, "active", note="an occurrence missed while down was skipped"
            )
            return
        try:
            if row.kind == "task":
                await self._hand_over(row, chat, late, due)
            else:
                await self._send_text(row, channel, chat, in_flight, late, due)
        except RateLimited as exc:
            await self._retry(row, now + exc.retry_after, failures=row.failures, why=str(exc))
            return
        except ChannelError as exc:  # a deleted chat, a bot blocked or removed ...
            failures = row.failures + 1
            if failures >= self.settings.max_failures:
                log.warning("schedule %s disabled after %d failed sends: %s", row.id, failures, exc)
                await self._settle(
                    row, None, "disabled", note=f"sending failed {failures} times: {exc}"[:300]
                )
            else:
                await self._retry(row, now + RETRY_S, failures=failures, why=str(exc))
            return
        if self.on_fired is not None:
            self.on_fired(row, self.clock() - due)
        await self._settle(row, max(now, due), "active")

    async def _send_text(
        self,
        row: ScheduleRow,
        channel: Channel,
        chat: ChatRef,
        in_flight: dict[str, object] | None,
        late: bool,
        due: float,
    ) -> None:
        content = OutboundContent(self._text(row, late, due))
        if in_flight is not None:
            record = in_flight.get("handle")
            handle = handle_from_record(record) if isinstance(record, dict) else None
            if handle is None or not isinstance(channel, NamesItsMessages):
                log.warning(
                    "schedule %s: occurrence %d was being sent by a process that died; the"
                    " platform may have it, so it is not sent again",
                    row.id,
                    row.occurrence,
                )
                return
            await self._post(channel, handle, content)  # the same message: shown once
            return
        if isinstance(channel, NamesItsMessages):
            handle = channel.reserve(chat, None)
            await self._mark(row, {"occurrence": row.occurrence, "handle": handle_record(handle)})
            await self._post(channel, handle, content)
            return
        await self._mark(row, {"occurrence": row.occurrence})
        try:
            await channel.send(chat, content, final=True)
        except DeliveryUncertain as exc:  # it may have landed: never a second copy
            log.warning("schedule %s: send uncertain, not repeated: %s", row.id, exc)

    async def _post(
        self, channel: NamesItsMessages, handle: MessageHandle, content: OutboundContent
    ) -> None:
        await channel.post(handle, content)
        await channel.edit(handle, content, final=True)  # type: ignore[attr-defined]

    async def _hand_over(self, row: ScheduleRow, chat: ChatRef, late: bool, due: float) -> None:
        """The task as a message of its author: the gateway claims its event id once."""
        language = row.language or self.language
        text = t(language, "schedule.task_prompt", task=row.body)
        if late:
            text = f"{text}\n{t(language, 'schedule.task_late', due=self._local(row, due))}"
        await self._mark(row, {"occurrence": row.occurrence})
        await self.inbox(
            InboundMessage(
                chat=chat,
                user_id=row.user_id,
                text=text,
                event_id=f"{EVENT_PREFIX}{row.id}:{row.occurrence}",
                mentioned=True,  # addressed to the bot, also in a group
                language=row.language,
            )
        )

    def _text(self, row: ScheduleRow, late: bool, due: float) -> str:
        if not late:
            return row.body
        note = t(row.language or self.language, "schedule.late_note", due=self._local(row, due))
        return f"{note}\n{row.body}"

    @staticmethod
    def _local(row: ScheduleRow, due: float) -> str:
        return datetime.fromtimestamp(due, ZoneInfo(row.timezone)).strftime("%Y-%m-%d %H:%M")

    async def _mark(self, row: ScheduleRow, sending: dict[str, object]) -> None:
        if not await self.records.schedule_sending(row.id, row.fence, json.dumps(sending)):
            raise _Lost

    async def _retry(self, row: ScheduleRow, at: float, *, failures: int, why: str) -> None:
        log.warning("schedule %s: send failed (%s); trying again later", row.id, why)
        await self._write(
            row,
            next_at=at,
            status="active",
            occurrence=row.occurrence,
            failures=failures,
            note=why[:300],
        )

    async def _settle(
        self, row: ScheduleRow, after: float | None, status: str, *, note: str | None = None
    ) -> None:
        """The occurrence is done (sent or skipped): on to the first occurrence after `after`
        (now, or the due time if later), never to one already past, so no catch-up burst."""
        following = None
        if after is not None and status == "active":
            following = next_at(row.spec, ZoneInfo(row.timezone), after)
            floor = (row.next_at or 0) + self.settings.min_interval_s / 2
            if (
                following is not None
                and following < floor
                and row.spec.startswith(("cron:", "every:"))
            ):
                following = next_at(row.spec, ZoneInfo(row.timezone), floor)  # never a runaway
        if status == "active" and following is None:
            status = "done"
        await self._write(
            row, next_at=following, status=status, failures=0,
            occurrence=row.occurrence + (status != "disabled"),  # fired or skipped
            note=note, fired_at=self.clock(),
        )  # fmt: skip

    async def _write(self, row: ScheduleRow, **values: object) -> None:
        if not await self.records.settle_schedule(row.id, row.fence, **values):  # type: ignore[arg-type]
            log.info("schedule %s: not settled (cancelled meanwhile, or taken over)", row.id)
