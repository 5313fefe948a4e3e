"""What a turn settles before it runs: the turns before it in its conversation.

A batch taken over from a process that died running it is finished in the turn that took it
(`taken_over`), and a user's new message withdraws the approval questions still waiting in the
conversation (`withdraw_questions`), so no history keeps a call left open.
"""

from __future__ import annotations

import logging

from adapters.base import InboundMessage
from bot.approvals.desk import ApprovalDesk
from bot.approvals.policy import presser
from bot.pipeline.conversations import TurnSignal
from bot.pipeline.resume import TurnResumer
from bot.pipeline.turn_input import TASK_EVENT
from bot.storage.base import StorageError
from bot.storage.roles import TurnRecords

log = logging.getLogger(__name__)


async def withdraw_questions(
    approvals: ApprovalDesk, resumer: TurnResumer, batch: list[InboundMessage], control: TurnSignal
) -> None:
    """A user's new message while a call waits for approval withdraws the question: that
    turn ends first (its model told it was not done), in its own live message, then this
    one runs — never a history with a call left open."""
    last = batch[-1]
    if all(message.event_id.startswith(TASK_EVENT) for message in batch):
        return  # a specialist's result is no answer from the user
    try:
        waiting = await approvals.dismiss(last.conversation_key, last.user_id, presser(last))
    except StorageError as exc:
        log.error("questions in %s not withdrawn: %s", last.conversation_key, exc)
        return
    for turn_id in waiting:
        await resumer.resume_turn(turn_id, control)


async def taken_over(
    turn_log: TurnRecords, resumer: TurnResumer, batch: list[InboundMessage], control: TurnSignal
) -> bool:
    """A batch taken over from a process that died running it (several processes): if a
    turn took these events, finish that one in its placeholder (never a second one), or, if
    it ended before its process died, leave it be: nothing is answered twice. False: no
    turn was recorded, so the batch is run as new."""
    last = batch[-1]
    turn = await turn_log.turn_for_events(last.conversation_key, [m.event_id for m in batch])
    if turn is None:
        return False
    if turn.status == "running":
        await resumer.resume_turn(str(turn.id), control)
    else:
        log.info("turn %s had ended (%s) before its process died", turn.id, turn.status)
    return True
