"""`ApprovalDesk`: answers to approval requests become decisions, audited, and resumed turns.

An answer is a press of one of the three buttons (any channel, any process: the request's id
rides in the button), a text reply ("allow", "deny") in the conversation where buttons do not
work, the request's expiry (`approvals.timeout_s`, swept by every process), or the user moving
on (a new message withdraws the question). Each is decided once in the store: a replayed press,
a second approver, a sweep racing a late press — whoever comes second changes nothing and
resumes nothing. The winner audits the decision (who, when, what) in the tool-call audit log,
settles the operator place's message, and queues the turn's resumption on its conversation, so
the process holding that conversation goes on in the same live message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from adapters.base import ChatRef, InboundMessage
from agent.types import AuditRecord
from bot.approvals.place import OperatorPlace
from bot.approvals.policy import (
    STATUS,
    ApprovalSettings,
    action_decision,
    may_answer,
    presser,
    text_decision,
)
from bot.approvals.prompt import verdict_line
from bot.storage.base import StorageError
from bot.storage.roles import ApprovalRecords, MessageRecords, TurnRecords
from bot.storage.rows import ApprovalRow
from bot.storage.turns import chat_from_record
from content.texts import DEFAULT_LANGUAGE

log = logging.getLogger(__name__)

# resume a turn on its conversation: (turn id, its chat, a tag telling this resumption apart)
Requeue = Callable[[str, ChatRef, str], Awaitable[None]]
Say = Callable[[InboundMessage, str], Awaitable[None]]  # a text key, in the chat's language
SWEEP_AT_MOST_S: Final = 30.0  # requests other processes made are noticed within this
SWEEP_RETRY_S: Final = 5.0  # after the store refused a sweep
# a decided request whose turn still waits this long after: its decider died before queueing
# the turn (a second queueing of a live one is harmless: the turn runs once, then is not waiting)
UNRESUMED_AFTER_S: Final = 20.0
AUDIT_SUFFIX: Final = ":approval"  # the decision's audit row: never taken for the call's result


class ApprovalDesk:
    def __init__(
        self,
        *,
        records: ApprovalRecords,
        turns: TurnRecords,
        audit: MessageRecords,
        settings: ApprovalSettings,
        place: OperatorPlace | None = None,
    ) -> None:
        self.records = records
        self.turns = turns
        self.audit = audit
        self.settings = settings
        self.place = place
        self._asked = asyncio.Event()  # a request made here: the sweep learns its expiry now

    def asked(self) -> None:
        """A request was made in this process (the gate says so): the sweep looks again."""
        self._asked.set()

    def may_be_answer(self, message: InboundMessage) -> bool:
        """Cheap, reading nothing: whether `message` could answer a request (one of the buttons,
        or a short reply such as "allow"). Everything else goes its usual way untouched."""
        return action_decision(message) is not None or text_decision(message) is not None

    async def take(self, message: InboundMessage, requeue: Requeue, say: Say) -> bool:
        """Answer a request with `message` (its event claimed); False when it answers none (a
        text "ok" in a conversation with nothing pending): it is then an ordinary message."""
        pressed = action_decision(message)
        if pressed is not None:
            decision, approval_id = pressed
            row = await self.records.approval(approval_id)
            if row is None:
                log.warning("press for unknown approval %r in %s", approval_id, message.chat.key)
                return True
        else:
            said = text_decision(message)
            pending = await self._pending_of(message.conversation_key, message.user_id)
            if said is None or not pending:
                return False  # another member's "ok" in a group is theirs to say
            decision, row = said, pending[-1]
        place_key = self.place.key if self.place is not None else None
        if not may_answer(self.settings, row, message, place_key):
            log.warning("approval %s: %s may not answer it", row.id, presser(message))
            await say(message, "approval.not_yours")
            return True
        await self.decide(row, decision, presser(message), requeue)
        return True

    async def decide(self, row: ApprovalRow, decision: str, who: str, requeue: Requeue) -> bool:
        """Decide request `row` (`once`, `always`, `deny`, `expired`, `dismissed`) if it is
        still pending; the turn is queued to go on. False: it was decided already."""
        status = STATUS.get(decision, decision)
        now = time.time()
        won = await self.records.decide_approval(
            row.id, status=status, decision=decision, by=who, at=now
        )
        if won is None:
            log.info(
                "approval %s was decided already; %s by %s changes nothing", row.id, decision, who
            )
            return False
        log.info("approval %s (%s): %s by %s", row.id, row.tool_name, decision, who)
        if decision == "always":
            await self.records.grant_approval(
                row.conversation_key, row.tool_name, row.target, by=who, at=now
            )
        await self.audit.record_tool_call(_audited(won))
        await self._resume(won, requeue)  # first: a slow Slack must not hold the turn back
        if self.place is not None:
            await self.place.settle(won, verdict_line(DEFAULT_LANGUAGE, decision, who))
        return True

    async def waiting(self) -> list[ApprovalRow]:
        """Every pending request, the soonest to expire first (the admin view's list)."""
        return await self.records.expired_approvals(math.inf)  # "expires by then": all of them

    async def answer_as(self, approval_id: str, decision: str, who: str, requeue: Requeue) -> bool:
        """An answer given outside any chat (the admin view): `who` is trusted by the caller."""
        row = await self.records.approval(approval_id)
        return row is not None and await self.decide(row, decision, who, requeue)

    async def dismiss(self, conversation_key: str, user_id: str, who: str) -> list[str]:
        """The user moved on (a new message): their pending questions are withdrawn (not
        another group member's: each user's turns have their own session); the ids of the
        turns to finish, which the caller (holding the conversation) resumes first."""
        turns: list[str] = []
        for row in await self._pending_of(conversation_key, user_id):
            won = await self.records.decide_approval(
                row.id, status="dismissed", decision="dismissed", by=who, at=time.time()
            )
            if won is not None:
                await self.audit.record_tool_call(_audited(won))
                if self.place is not None:
                    await self.place.settle(won, verdict_line(DEFAULT_LANGUAGE, "dismissed", who))
                turns.append(won.turn_id)
        return turns

    async def _pending_of(self, conversation_key: str, user_id: str) -> list[ApprovalRow]:
        rows = await self.records.pending_approvals(conversation_key)
        return [row for row in rows if row.user_id == user_id]

    async def expire(self, requeue: Requeue) -> None:
        """Until cancelled: each request nobody answered in time is denied, and its turn goes
        on. Every process sweeps; the store lets one of them decide each request. A turn whose
        request was decided by a process that died before queueing it is queued again."""
        while True:
            try:
                for row in await self.records.expired_approvals(time.time()):
                    await self.decide(row, "expired", "timeout", requeue)
                for row in await self.records.unresumed_approvals(time.time() - UNRESUMED_AFTER_S):
                    log.warning("approval %s was decided, its turn never went on: queued", row.id)
                    await self._resume(row, requeue)
                upcoming = await self.records.next_approval_expiry()
            except StorageError as exc:
                log.warning("approvals not swept: %s; again in %g s", exc, SWEEP_RETRY_S)
                await asyncio.sleep(SWEEP_RETRY_S)
                continue
            wait = SWEEP_AT_MOST_S if upcoming is None else upcoming - time.time()
            self._asked.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(max(wait, 0.05), SWEEP_AT_MOST_S)):
                    await self._asked.wait()

    async def _resume(self, row: ApprovalRow, requeue: Requeue) -> None:
        turn = await self.turns.get_turn(row.turn_id)
        chat = chat_from_record(turn.placeholder) if turn and turn.placeholder else None
        if chat is None:
            log.error("approval %s: turn %s has no conversation to go on in", row.id, row.turn_id)
            return
        await requeue(row.turn_id, chat, row.id)


def _audited(row: ApprovalRow) -> AuditRecord:
    """The decision as the tool-call audit log keeps it: who, when, what."""
    decided_at = row.decided_at or time.time()
    allowed = row.status == "allowed"
    return AuditRecord(
        session_id=row.session_id,
        turn_id=row.turn_id,
        call_id=row.call_id + AUDIT_SUFFIX,
        tool_name=row.tool_name,
        arguments=row.arguments,
        result=f"approval {row.id}: {row.decision} by {row.decided_by}",
        ok=allowed,
        duration_ms=(decided_at - row.created_at) * 1000,
        extra={
            "approval": {
                "id": row.id,
                "decision": row.decision,
                "status": row.status,
                "by": row.decided_by,
                "at": decided_at,
                "asked_at": row.created_at,
                "target": row.target,
                "conversation_key": row.conversation_key,
            }
        },
    )


@dataclass(frozen=True, slots=True)
class DeskAnswers:
    """The desk as the admin view answers through it (bot/ops/admin/approvals.py)."""

    desk: ApprovalDesk
    requeue: Requeue

    async def waiting(self) -> list[ApprovalRow]:
        return await self.desk.waiting()

    async def answer(self, approval_id: str, decision: str, who: str) -> bool:
        return await self.desk.answer_as(approval_id, decision, who, self.requeue)
