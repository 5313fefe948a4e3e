"""A turn's writes, fenced: once the turn is lost to another process, this one writes nothing.

With several processes (`redis.url`) a turn is held on a leased lock. A process that stalls past
its lease (SIGSTOP, a long GC pause, a paused VM) has its turn taken over by another, which
resumes it from what was recorded (bot/pipeline/resume.py). When the stalled one wakes, its heartbeat
finds the lease gone and marks the turn lost (`TurnSignal.lose`), which cancels its model work;
the coordinator then closes the calls it left open, writes the usage it buffered, and so on.
Those writes would land in a turn that is now the other process's: a second result for a call
the other process answered (a `tool_use` id with two `tool_result`s, which the vendors refuse
on the next request), a second audit row, usage counted twice. So every write the coordinator
makes for a turn goes through `FencedWrites`, which drops it once the fence says lost: one check
at the one place the turn writes, rather than checks sprinkled over the loop. Its specialists
write through one too (agent/workers.py): their audit rows and usage are the turn's.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from agent.store import Store, UsageRow
from agent.types import AuditRecord, Message
from tools.base import Fence

log = logging.getLogger(__name__)

__all__ = ["Fence", "FencedWrites"]


class FencedWrites:
    """The store's turn writes (history, audit rows, usage), dropped once `fence` is lost."""

    def __init__(self, store: Store, fence: Fence | None, turn_id: str) -> None:
        self.store = store
        self.fence = fence
        self.turn_id = turn_id
        self.dropped = 0  # writes refused since the turn was lost (the log says how many)

    @property
    def lost(self) -> bool:
        return self.fence is not None and self.fence.lost

    def _refuse(self, what: str) -> bool:
        if not self.lost:
            return False
        self.dropped += 1
        log.info("turn %s is another process's now: its %s is not written", self.turn_id, what)
        return True

    async def append_messages(
        self,
        session_id: str,
        turn_id: str,
        messages: Sequence[Message],
        usage: Sequence[UsageRow] = (),
    ) -> None:
        if not self._refuse(f"{len(messages)} message(s)"):
            await self.store.append_messages(session_id, turn_id, messages, usage)

    async def record_tool_call(self, record: AuditRecord) -> None:
        if not self._refuse(f"audit row of call {record.call_id}"):
            await self.store.record_tool_call(record)

    async def record_usage(
        self,
        *,
        session_id: str,
        turn_id: str | None,
        provider: str,
        model: str,
        input_tokens: int,
        output_tokens: int,
    ) -> None:
        if not self._refuse("usage"):
            await self.store.record_usage(
                session_id=session_id,
                turn_id=turn_id,
                provider=provider,
                model=model,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
            )
