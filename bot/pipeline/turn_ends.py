"""`TurnEnds`: a turn's end is recorded, even when the store refused it at the time.

A turn that ended (answered, stopped, or apologised for: "I couldn't save this… send it again")
must not stay `running`: in embedded mode the next start would resume it (bot/pipeline/recovery.py),
ask the model again and answer into a placeholder the user was told to give up on, while the
user's resend gets its own answer: two answers. The store that refused the turn's last writes
(a database outage, a full disk) usually refuses its `finish_turn` too, so the end is kept here
and tried again in the background, with backoff, until the store answers; at shutdown once more.

Why not (only) start-up recovery telling an ended turn from a cut one? What the placeholder
showed last is nowhere but on the platform (which cannot be asked) and in this process; the row
is the one durable place. Recovery can tell one case: a later turn of the same conversation ran
(`ended_unrecorded`: the user's resend was answered, then the process was killed before the end
was written); that turn is given up, never resumed. A process stopped while the store still
refuses, before any resend, leaves the turn `running`: logged, with the turn's id, as the one
window left (the next start answers it, once, in its placeholder).

An answer the user already saw whole (streamed) when the store refused to save it is kept, not
taken back (`answer`): it is saved with the end, unless the history holds it already (the
refused write may have landed), so the next turn's model sees it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Final

from agent.types import Message
from bot.storage.base import StorageError
from bot.storage.roles import MessageRecords, TurnRecords
from bot.storage.rows import ResumedTurn
from content.parts import Part

log = logging.getLogger(__name__)

BACKOFF_S: Final = (0.5, 5.0)  # one cheap attempt a round: waits double from 0.5 s up to 5 s
FLUSH_S: Final = 5.0  # at shutdown: how long the last attempts may take together


@dataclass(frozen=True, slots=True)
class TurnEnd:
    turn_id: str
    status: str
    final_text: str | None
    error: str | None
    answer: tuple[str, Message] | None = None  # (session id, the answer): saved first
    parts: tuple[Part, ...] = ()  # the media the answer went out with: a reload shows them


class TurnEnds:
    """Record turns' ends; the ones the store refused are kept and retried (`retry`, `flush`)."""

    def __init__(self, store: TurnRecords, messages: MessageRecords | None = None) -> None:
        self.store = store
        self.messages = messages  # where a kept answer is saved (`record(answer=…)`)
        self.pending: dict[str, TurnEnd] = {}  # by turn id, oldest first
        self._more = asyncio.Event()

    async def record(
        self,
        turn_id: str,
        status: str,
        final_text: str | None,
        error: str | None,
        answer: tuple[str, Message] | None = None,
        parts: tuple[Part, ...] = (),
    ) -> bool:
        """Record the end now if the store answers; else keep it for `retry`. True if recorded.
        `answer`: (session id, message) the store refused to save while the user saw it;
        `parts`: the media the final answer carried."""
        end = TurnEnd(turn_id, status, final_text, error, answer, parts)
        try:
            await self._write(end)
        except StorageError as exc:
            log.warning(
                "turn %s ended (%s) but was not recorded (%s); retried until storage answers",
                turn_id,
                status,
                exc,
            )
            self.pending[turn_id] = end
            self._more.set()
            return False
        self.pending.pop(turn_id, None)  # a later end of the same turn supersedes a kept one
        return True

    async def retry(self) -> None:
        """Until cancelled: write the kept ends, oldest first, backing off while the store
        refuses (one attempt a round: a refused write says the store is still away)."""
        wait = BACKOFF_S[0]
        while True:
            if not self.pending:
                self._more.clear()
                await self._more.wait()
                wait = BACKOFF_S[0]
            await asyncio.sleep(wait)
            if not await self._write_pending():
                wait = min(wait * 2, BACKOFF_S[1])

    async def flush(self, deadline_s: float = FLUSH_S) -> None:
        """At shutdown, after the last turn ended: one more try; what stays is logged by id (the
        next start resumes those turns as interrupted)."""
        if self.pending:
            try:
                async with asyncio.timeout(deadline_s):
                    await self._write_pending()
            except TimeoutError:
                pass
        for end in self.pending.values():
            log.error(
                "turn %s ended (%s) but storage never recorded it; it is still `running`",
                end.turn_id,
                end.status,
            )

    async def _write_pending(self) -> bool:
        """Write the kept ends in order; False at the first the store refuses."""
        while self.pending:
            end = next(iter(self.pending.values()))
            try:
                await self._write(end)
                log.info("turn %s: its end (%s) is recorded now", end.turn_id, end.status)
            except StorageError:
                return False
            except LookupError as exc:  # never created after all: nothing to end
                log.error("turn %s: its end (%s) is dropped: %s", end.turn_id, end.status, exc)
            if self.pending.get(end.turn_id) is end:
                del self.pending[end.turn_id]
        return True

    async def _write(self, end: TurnEnd) -> None:
        if end.answer is not None and self.messages is not None:
            session_id, answer = end.answer
            rows = await self.messages.load_history(session_id)
            if not any(
                owner == end.turn_id and m.role == "assistant" and m.content == answer.content
                for owner, m in rows
            ):
                await self.messages.append_messages(session_id, end.turn_id, [answer])
                log.info("turn %s: the answer the user saw is saved now", end.turn_id)
        await self.store.finish_turn(
            end.turn_id,
            status=end.status,
            final_text=end.final_text,
            error=end.error,
            final_parts=end.parts,
        )


async def ended_unrecorded(store: TurnRecords, turn: ResumedTurn) -> bool:
    """Whether a `running` turn (as `begin_resume` returns it) is followed by a later turn of
    its conversation. A conversation runs one turn at a time, an interrupted one resumed before
    any newer message; so this one had ended though its end was never recorded (its process was
    killed before `TurnEnds` wrote it, say). Resuming it would answer the user's resend twice."""
    newest = await store.recent_turns(
        channel=turn.channel,
        conversation_key=turn.conversation_key,
        user_id=turn.user_id,
        agent_id=turn.agent_id,
        limit=1,
    )
    return bool(newest) and newest[-1].id != turn.id
