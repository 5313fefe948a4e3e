"""The handoff desk: a conversation passes from the bot to a person and back, exactly once each.

Every transition is one compare-and-set on the conversation's state (`ConversationState.update`,
over the store or Redis), so whatever races — two operators pressing Take, a Take and the queue
timeout, a release and the user's /stop — exactly one change lands and the others are told why.
The `handoffs` row is written after, by the winner only: what operators list and read. The user
hears of each change in their own chat; operators in their place (place.py) and, live, in the
admin view (feed.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Literal, Protocol

from adapters.base import Channel, ChannelError, ChatRef
from bot.handoff.context import HandoffContext, History, SessionFor
from bot.handoff.feed import HandoffFeed
from bot.handoff.model import (
    ASKED_SETTING,
    OPEN_SETTING,
    AlreadyTaken,
    Asked,
    HandoffError,
    HandoffSettings,
    NotOpen,
    Operator,
)
from bot.handoff.notices import Notices
from bot.handoff.place import OperatorPlace
from bot.handoff.timeouts import Timeouts
from bot.pipeline.conversation_state import ConversationState, StateSnapshot
from bot.storage.roles import HandoffRecords
from bot.storage.rows import HandoffRow
from bot.storage.turns import chat_from_record, chat_record
from content.texts import t

log = logging.getLogger(__name__)

Ending = Literal["release", "resolve"]


class _Refused(Exception):
    """Raised inside a state change: the change does not apply (nothing is written)."""


class Claims(Protocol):
    async def claim(self, event_id: str) -> bool: ...

    async def release(self, event_id: str) -> None: ...


def _open_id(state: StateSnapshot) -> str | None:
    return state.settings.get(OPEN_SETTING)


def _to_bot(state: StateSnapshot) -> StateSnapshot:
    state = state.with_setting(OPEN_SETTING, None).with_setting(ASKED_SETTING, None)
    return replace(state, mode="bot", assignee=None)


class HandoffDesk:
    def __init__(
        self,
        *,
        settings: HandoffSettings,
        states: ConversationState,
        records: HandoffRecords,
        history: History,
        session_for: SessionFor,
        channels: Mapping[str, Channel],
        claims: Claims,
        place: OperatorPlace | None = None,
        feed: HandoffFeed | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`session_for`: a conversation's active session (operator replies and the marker go
        into its history); `claims`: event ids taken once (an operator's reply sent twice by
        its platform, or a form posted twice, reaches the user once)."""
        self.settings = settings
        self.states = states
        self.records = records
        self.context = HandoffContext(history, session_for)
        self.claims = claims
        self.place = place
        self.feed = feed or HandoffFeed()
        self.clock = clock
        self.notices = Notices(channels, self.feed)
        self.timeouts = Timeouts(self.expire, clock=clock)
        self._order: dict[str, asyncio.Lock] = {}  # per conversation: replies go out in order

    # -- a user asks -------------------------------------------------------------------
    def unavailable(self, language: str | None) -> str | None:
        """Why nobody can be asked now (the user's notice), or None."""
        if self.settings.place is None:
            return t(language, "handoff.no_place")
        if not self.settings.open_now(self.clock()):
            return t(language, "handoff.closed", hours=self.settings.hours_text)
        return None

    async def ask(self, chat: ChatRef, asked: Asked, *, language: str | None, via: str) -> str:
        """The user's (or the model's) request: the conversation waits for a person. The
        notice the user gets is returned, for the caller to send where its reply goes."""
        refusal = self.unavailable(language)
        if refusal is not None:
            return refusal
        handoff_id = uuid.uuid4().hex

        def wait(state: StateSnapshot) -> StateSnapshot:
            if state.mode != "bot":
                raise _Refused
            opened = replace(state, mode="waiting", assignee=None)
            return opened.with_setting(OPEN_SETTING, handoff_id).with_setting(ASKED_SETTING, None)

        try:
            await self.states.update(chat.key, wait)
        except _Refused:
            return t(language, "handoff.already")
        now = self.clock()
        row = HandoffRow(
            handoff_id, chat.key, chat.channel, json.dumps(chat_record(chat)), asked.user_id,
            asked.user_name, language, asked.reason, asked.summary, "waiting",
            None, None, now, None, None, None,
        )  # fmt: skip
        try:
            await self.records.save_handoff(row)
            await self._audit(row, f"user:{asked.user_id}", "requested", f"{via}: {asked.reason}")
        except Exception:
            await self.states.update(chat.key, _to_bot)  # no row, no queue: the bot keeps it
            raise
        self.timeouts.add(handoff_id, now + self.settings.queue_timeout_s)
        row = await self._opened(row)
        await self.notices.state(row, chat)
        log.info("handoff %s asked in %s (%s)", handoff_id, chat.key, via)
        return t(language, "handoff.requested")

    async def _opened(self, row: HandoffRow) -> HandoffRow:
        """The handoff posted in the operators' place (its thread kept with the row)."""
        if self.place is None:
            return row
        try:
            thread = await self.place.opened(row)
        except ChannelError as exc:  # the admin view still lists it
            log.error("handoff %s not posted to the operators' place: %s", row.id, exc)
            return row
        row = replace(row, thread=thread)
        await self.records.save_handoff(row)
        try:
            recap = await self.context.recap(row)
            if recap:
                await self.place.mirror(row, "Earlier in this conversation", "\n" + recap)
        except ChannelError as exc:
            log.error("handoff %s: the conversation so far not mirrored: %s", row.id, exc)
        return row

    # -- operators act -----------------------------------------------------------------
    async def take(self, handoff_id: str, operator: Operator, *, via: str) -> HandoffRow:
        row = await self._row(handoff_id)

        def hold(state: StateSnapshot) -> StateSnapshot:
            if _open_id(state) != handoff_id:
                raise NotOpen(f"handoff {handoff_id} has ended")
            if state.mode == "human":
                raise AlreadyTaken(state.assignee or "someone")
            return replace(state, mode="human", assignee=operator.id)

        try:
            await self.states.update(row.conversation_key, hold)
        except AlreadyTaken as exc:
            if exc.holder == operator.id:
                return row  # pressed twice: it is theirs
            holder = await self._row(handoff_id)
            await self._audit(row, operator.id, "take refused", f"held by {exc.holder}")
            raise AlreadyTaken(holder.operator_name or exc.holder) from None
        row = replace(
            row, status="human", operator=operator.id, operator_name=operator.name,
            taken_at=self.clock(),
        )  # fmt: skip
        await self.records.save_handoff(row)
        await self._audit(row, operator.id, "took", via)
        self.timeouts.cancel(handoff_id)
        await self.notices.inform(row, t(row.language, "handoff.taken", name=operator.name))
        await self._changed(row)
        return row

    async def take_over(
        self, chat: ChatRef, user_id: str, operator: Operator, *, via: str
    ) -> HandoffRow:
        """An operator takes a conversation the bot holds, unasked (the admin view)."""
        handoff_id = uuid.uuid4().hex

        def hold(state: StateSnapshot) -> StateSnapshot:
            if state.mode != "bot":
                raise HandoffError(f"this conversation is already {state.mode}: open its handoff")
            held = replace(state, mode="human", assignee=operator.id)
            return held.with_setting(OPEN_SETTING, handoff_id)

        state = await self.states.update(chat.key, hold)
        now = self.clock()
        row = HandoffRow(
            handoff_id, chat.key, chat.channel, json.dumps(chat_record(chat)), user_id, None,
            state.settings.get("language"), f"taken over by {operator.name}", "", "human",
            operator.id, operator.name, now, now, None, None,
        )  # fmt: skip
        await self.records.save_handoff(row)
        await self._audit(row, operator.id, "took over", via)
        row = await self._opened(row)
        await self.notices.inform(row, t(row.language, "handoff.taken", name=operator.name))
        await self.notices.state(row, chat)
        return row

    async def end(
        self, handoff_id: str, operator: Operator, how: Ending, *, via: str, note: str = ""
    ) -> HandoffRow:
        """Back to the bot (release: the bot goes on; resolve: the matter is closed), with a
        marker in the bot's context saying who handled it, when, and how it ended."""
        row = await self._row(handoff_id)

        def back(state: StateSnapshot) -> StateSnapshot:
            if _open_id(state) != handoff_id:
                raise NotOpen(f"handoff {handoff_id} has ended already")
            return _to_bot(state)

        await self.states.update(row.conversation_key, back)
        status = "released" if how == "release" else "resolved"
        row = replace(
            row, status=status, ended_at=self.clock(),
            operator=row.operator or operator.id, operator_name=row.operator_name or operator.name,
            summary=note or row.summary,
        )  # fmt: skip
        await self.records.save_handoff(row)
        await self._audit(row, operator.id, status, note or via)
        self.timeouts.cancel(handoff_id)
        await self.context.ended(row, row.ended_at or self.clock())
        await self.notices.inform(row, t(row.language, f"handoff.{status}", name=operator.name))
        await self._changed(row)
        return row

    async def reply(
        self, handoff_id: str, operator: Operator, text: str, *, event_id: str | None, via: str
    ) -> bool:
        """An operator's message to the user, through the user's own channel, labelled with
        their name. Once per `event_id` (None: the caller claimed it); False for a repeat.
        Replying to a waiting handoff takes it."""
        row = await self._row(handoff_id)
        if event_id is not None and not await self.claims.claim(event_id):
            return False
        lock = self._order.setdefault(row.conversation_key, asyncio.Lock())
        async with lock:
            state = await self.states.get(row.conversation_key)
            if _open_id(state) != handoff_id:
                raise NotOpen("this conversation is back with the bot; nothing was sent")
            if state.mode == "waiting":
                row = await self.take(handoff_id, operator, via=via)
            elif state.assignee != operator.id:
                raise AlreadyTaken(row.operator_name or state.assignee or "someone")
            name = row.operator_name or operator.name
            try:
                await self.notices.tell(row, t(row.language, "handoff.reply", name=name, text=text))
            except ChannelError:
                if event_id is not None:  # not delivered: the same form again may send it
                    await self.claims.release(event_id)
                raise
            await self.context.said(row, name, text)
            if self.place is not None and via != "place" and row.thread:
                await self.place.mirror(row, name, text)
            await self.feed.publish(
                row.id, {"kind": "message", "role": "operator", "who": name, "text": text}
            )
        return True

    # -- the user's side ---------------------------------------------------------------
    async def relay(self, conversation_key: str, who: str, text: str) -> None:
        """A user's message in a held conversation (recorded already), shown to operators."""
        handoff_id = _open_id(await self.states.get(conversation_key))
        if handoff_id is None:
            return
        row = await self.records.get_handoff(handoff_id)
        if row is None:
            return
        await self.feed.publish(
            row.id, {"kind": "message", "role": "user", "who": who, "text": text}
        )
        if self.place is not None and row.thread:
            try:
                await self.place.mirror(row, who, text)
            except ChannelError as exc:
                log.error("handoff %s: a user message not mirrored: %s", row.id, exc)

    async def withdraw(self, conversation_key: str, user_id: str) -> bool:
        """The user's /stop while a person is asked for or holds it: back to the bot."""
        ended: list[str] = []

        def back(state: StateSnapshot) -> StateSnapshot:
            handoff_id = _open_id(state)
            if handoff_id is None or state.mode == "bot":
                raise _Refused
            ended.append(handoff_id)
            return _to_bot(state)

        try:
            await self.states.update(conversation_key, back)
        except _Refused:
            return False
        row = await self._row(ended[-1])
        row = replace(row, status="withdrawn", ended_at=self.clock())
        await self.records.save_handoff(row)
        await self._audit(row, f"user:{user_id}", "withdrawn", "/stop")
        self.timeouts.cancel(row.id)
        if row.taken_at is not None:
            await self.context.ended(row, row.ended_at or self.clock())
        await self._changed(row)
        return True

    async def expire(self, handoff_id: str) -> None:
        """Nobody took it in time: back to the bot, with an apology (once, whoever fires)."""
        row = await self.records.get_handoff(handoff_id)
        if row is None:
            return

        def back(state: StateSnapshot) -> StateSnapshot:
            if _open_id(state) != handoff_id or state.mode != "waiting":
                raise _Refused
            return _to_bot(state)

        try:
            await self.states.update(row.conversation_key, back)
        except _Refused:
            return
        row = replace(row, status="expired", ended_at=self.clock())
        await self.records.save_handoff(row)
        await self._audit(row, "timeout", "expired", f"{self.settings.queue_timeout_s:g} s")
        await self.notices.inform(row, t(row.language, "handoff.expired"))
        await self._changed(row)

    async def run(self) -> None:
        """The queue timeouts: of the store's waiting handoffs (a restart's) and of every one
        opened since, here or (over Redis) by another process, so one whose process died still
        expires. Each process's timer fires; the compare-and-set lets one of them land."""
        try:
            rows = await self.waiting()
        except Exception:  # a storage hiccup at start must not stop the gateway
            log.exception("the waiting handoffs not read: their timeouts wait for a change")
            rows = []
        due = [(r.id, r.requested_at + self.settings.queue_timeout_s) for r in rows]
        async with self.feed.subscribe("*") as frames, asyncio.TaskGroup() as group:
            group.create_task(self.timeouts.run(due), name="handoff timeouts")
            while True:
                frame = json.loads(await frames.get())
                if frame.get("type") == "state" and frame.get("status") == "waiting":
                    await self._watch(str(frame.get("handoff_id")))  # never raises

    async def _watch(self, handoff_id: str) -> None:
        try:
            row = await self.records.get_handoff(handoff_id)
        except Exception:  # its own process's timer, or the next start's, still has it
            log.exception("handoff %s: its queue timeout not set here", handoff_id)
            return
        if row is not None and row.status == "waiting":
            self.timeouts.add(row.id, row.requested_at + self.settings.queue_timeout_s)

    async def open_for(self, conversation_key: str) -> HandoffRow | None:
        handoff_id = _open_id(await self.states.get(conversation_key))
        return None if handoff_id is None else await self.records.get_handoff(handoff_id)

    async def waiting(self) -> list[HandoffRow]:
        """The open handoffs (for the timeouts at start)."""
        return await self.records.list_handoffs(statuses=("waiting",), limit=10_000)

    # -- helpers -----------------------------------------------------------------------
    async def _row(self, handoff_id: str) -> HandoffRow:
        row = await self.records.get_handoff(handoff_id)
        if row is None:
            raise NotOpen(f"no handoff {handoff_id!r}")
        return row

    async def _audit(self, row: HandoffRow, actor: str, action: str, detail: str) -> None:
        await self.records.audit_handoff(
            row.id, at=self.clock(), actor=actor, action=action, detail=detail[:500]
        )
        await self.feed.publish(row.id, {"kind": "audit", "who": actor, "text": action})

    async def _changed(self, row: HandoffRow) -> None:
        chat = chat_from_record(json.loads(row.chat))
        if chat is not None:
            await self.notices.state(row, chat)
        if self.place is not None and row.thread:
            try:
                await self.place.changed(row)
            except ChannelError as exc:
                log.error("handoff %s: the operators' place not updated: %s", row.id, exc)
