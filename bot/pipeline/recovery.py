"""At start, in embedded mode: finish what a dead process left unfinished.

With one `bot serve` per database, a turn still `running` at start belongs to a process that
died (kill -9, OOM, power loss). Each is queued on its conversation, ahead of any new message,
and resumed into its placeholder (bot/pipeline/resume.py), or ended there with a short apology. Its
inbound events stay claimed, so a platform's redelivery of the same message is not answered a
second time.

A specialist the dead process was running is gone with it: its session is marked `failed`, and
its conversation's coordinator is told, as for any background result, so the user learns that
the task did not finish instead of waiting for a result that will never come. One a turn was
still waiting for (its `AgentTool` call open) needs no such note: that turn cannot be resumed
(a specialist is not run twice) and ends with its own apology.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from adapters.base import Channel
from agent.replay import open_calls
from agent.workers import BackgroundResult, Deliver
from bot.pipeline.gateway import Gateway
from bot.storage.roles import MessageRecords, TurnRecords
from bot.storage.turns import chat_from_record

log = logging.getLogger(__name__)

WORKER_INTERRUPTED = (
    "interrupted: the gateway restarted before this specialist finished, and its work is lost."
    " Nothing it found was delivered; dispatch it again if the user still needs it."
)


async def recover_interrupted_turns(
    turn_log: TurnRecords,
    message_log: MessageRecords,
    channels: Mapping[str, Channel],
    gateway: Gateway,
    deliver: Deliver,
    *,
    close_orphans: bool = True,
) -> int:
    """Queue every unfinished turn for resumption and report lost specialists (to `deliver`,
    as their background results would have gone); how many turns.

    `close_orphans=False` (`bot chat`, which runs no platform channel) leaves the turns and
    specialists of channels not running here to the next `bot serve`, which can edit their
    placeholders.
    """
    taken = 0
    waited_on: set[str] = set()  # sessions whose unfinished turn was waiting for a specialist
    for turn in await turn_log.unfinished_turns():
        if turn.channel not in channels and not close_orphans:
            continue
        history = await message_log.load_history(turn.session_id)
        own = [message for owner, message in history if owner == turn.id]
        if any(call.name == "AgentTool" for call in open_calls(own)):
            waited_on.add(turn.session_id)
        record = turn.placeholder
        chat = chat_from_record(record) if record else None  # a handle's, or where it was to go
        if chat is None:
            await gateway.resume_turn(turn.id)  # nowhere to answer: ended at once
        else:
            await gateway.queue_resume(turn.id, chat)
        taken += 1
    for session in await turn_log.running_worker_sessions():
        if session.channel not in channels and not close_orphans:
            continue
        await message_log.set_session_status(session.id, "failed")
        log.warning(
            "specialist %s (session %s) was interrupted by the last shutdown",
            session.agent_id,
            session.id,
        )
        if session.parent_session_id in waited_on:
            continue
        lost = BackgroundResult(
            task_id=session.id[:12],
            subagent_type=session.agent_id,
            description=f"{session.agent_id} task",
            status="failed",
            text=WORKER_INTERRUPTED,
            conversation_key=session.conversation_key,
            channel=session.channel,
            user_id=session.user_id,
        )
        await deliver(lost)
    return taken
