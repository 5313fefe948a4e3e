"""One conversation drained by the process holding its lease: batch after batch, then let go.

The leases a process holds are extended together: one heartbeat task per process sends, every
third of a lease, one EXTEND_MANY call for all of them (conversations_lua.py), instead of a task
and two round trips (extend, XCLAIM) per held conversation. A drain only registers its lease.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from redis.asyncio import Redis
from redis.exceptions import RedisError

from adapters.base import InboundMessage
from bot.pipeline.conversations import RunTurn, TurnSignal
from bot.redis import messages
from bot.redis.client import LuaScript, cancelled_meanwhile, describe
from bot.redis.conversations_lua import GROUP
from bot.redis.script_batch import ScriptBatch
from bot.redis.states import primed

log = logging.getLogger(__name__)

RETRY_S: Final = 0.2
SHUTDOWN_S: Final = 2.0


@dataclass(eq=False, slots=True)
class Lease:
    """A conversation's lease this process holds: its stream entry, whether it was lost, and the
    turn running under it. The turn is the lease's own, not the conversation's: a process that
    stalled past its lease can take the conversation back under a new one (its own XAUTOCLAIM)
    while the old drain's turn still runs, and losing the old lease must stop only that turn."""

    entry_id: str
    lost: asyncio.Event = field(default_factory=asyncio.Event)
    signal: TurnSignal | None = None


class HeldQueue(Protocol):
    """What a drain uses of the queue whose lease it holds (`RedisConversations`): its keys and
    scripts, its batches, the leases it holds and the turns running in this process."""

    redis: Redis
    consumer: str
    lease_ms: int
    coalesce_ms: int
    scripts: dict[str, LuaScript]
    nexts: ScriptBatch
    takes: ScriptBatch
    extends: ScriptBatch
    leases: dict[tuple[str, int], Lease]  # (conversation, token)
    run_turn: RunTurn | None
    signals: dict[str, TurnSignal]

    @property
    def ready(self) -> str: ...

    def key(self, conversation: str, part: str) -> str: ...
    def claim_keys(self, c: str) -> list[str]: ...
    def claim_args(self, c: str, entry_id: str, flag: str, token: int = 0) -> list[str | int]: ...
    def next_batch(self, queued: list[str]) -> tuple[list[int], list[InboundMessage]]: ...
    def batch_json(self, batch: list[InboundMessage]) -> str: ...
    def load_batch(self, text: str) -> list[InboundMessage]: ...
    def stop_here(self, conversation_key: str) -> None: ...


async def drain(q: HeldQueue, c: str, token: int, entry_id: str, looked: list[Any]) -> bool:
    """Run `c`'s turns while holding its lease. `looked`: what CLAIM saw (empty: it did not
    look). True: drained, let go and the entry acked; False: the lease was lost or Redis failed
    (the entry stays pending for a reclaim)."""
    q.leases[c, token] = lease = Lease(entry_id)
    try:
        return await _turns(q, c, token, entry_id, looked, lease)
    except asyncio.CancelledError:
        await _abandon(q, c, token, entry_id)
        raise
    except RedisError as exc:
        cancelled_meanwhile()
        log.warning("conversation %s: Redis failed mid-drain (%s)", c, describe(exc))
        return False
    finally:
        del q.leases[c, token]


async def _turns(
    q: HeldQueue, c: str, token: int, entry_id: str, looked: list[Any], lease: Lease
) -> bool:
    """One NEXT per turn: it forgets the batch just answered and takes the next (see
    conversations_lua.NEXT); a queue of several messages needs a TAKE for the batch picked here.
    The reply that hands a batch ends with the conversation's state, read for the turn."""
    keys, args = q.claim_keys(c), q.claim_args(c, entry_id, "", token)
    if not looked:
        if q.coalesce_ms:
            await asyncio.sleep(q.coalesce_ms / 1000)  # let a burst arrive
        looked = await q.nexts.send(c, keys, args)
    while not lease.lost.is_set():
        kind = int(looked[0])
        if kind == 0:
            return False  # the lease was lost
        if kind == 1:
            return True
        state: list[str] = looked[-1]
        if kind == 2:  # a batch the last holder began and never finished
            text, batch, resumed = looked[1], q.load_batch(looked[1]), True
        elif kind == 3:
            text, batch, resumed = looked[2], [messages.load(looked[1])], False
        else:
            queued = looked[1:-1]
            taken, batch = q.next_batch(queued)
            text = q.batch_json(batch)
            picks = json.dumps([[i, queued[i]] for i in taken], ensure_ascii=False)
            take: list[str | int] = [token, q.lease_ms, text, picks]
            outcome = int((await q.takes.send(c, keys[:5], take))[0])
            if outcome == 0:
                return False
            if outcome < 0:  # a /stop emptied the queue meanwhile
                looked = await q.nexts.send(c, keys, args)
                continue
            resumed = False
        log.debug("conversation %s: a turn of %d message(s) runs here", c, len(batch))
        with primed(keys[7], state):
            await _run(q, c, batch, resumed, lease)
        looked = await _finish(q, keys, [*args[:7], text])
    return False


async def _run(
    q: HeldQueue,
    c: str,
    batch: list[InboundMessage],
    resumed: bool,
    lease: Lease,
) -> None:
    run_turn = q.run_turn
    if run_turn is None:
        return
    # /stop reaches the newest turn of `c` here (`stop_here`); a lost lease, its own (heartbeats)
    q.signals[c] = lease.signal = signal = TurnSignal(resumed=resumed)
    try:
        await run_turn(batch, signal)
    except Exception:
        # one conversation's failure (say, its channel cannot deliver) never stops others
        log.exception("turn in %s failed to deliver", c)
    finally:
        lease.signal = None
        if q.signals.get(c) is signal:  # not a newer drain's, under a lease taken back since
            del q.signals[c]


async def _finish(q: HeldQueue, keys: list[str], args: list[str | int]) -> list[Any]:
    """The turn is answered: NEXT forgets its batch and looks, retried through a Redis restart
    (a batch left recorded would be taken over as unfinished). A retry whose first attempt ran
    (its reply lost) finds the batch that attempt took recorded: that one is not a dead holder's,
    so it comes back as kind 3 (not resumed)."""
    deadline = asyncio.get_running_loop().time() + q.lease_ms / 1000
    retried = False
    while True:
        try:
            looked: list[Any] = await q.nexts.send(str(args[2]), keys, args)
        except RedisError:
            if asyncio.get_running_loop().time() > deadline:
                raise
            retried = True
            await asyncio.sleep(RETRY_S)
            continue
        if retried and int(looked[0]) == 2:
            taken = json.loads(looked[1])
            if len(taken) == 1:  # only a batch of one is taken inside NEXT
                return [3, taken[0], looked[1], looked[2]]
        return looked


async def heartbeats(q: HeldQueue) -> None:
    """Every third of a lease, extend every lease this process holds, in one call (more than
    ScriptBatch's 50: one after the other), keep their stream entries ours (no reclaim while we
    live) and read /stop flags. A lease lost to another process stops its turn here."""
    while True:
        await asyncio.sleep(q.lease_ms / 3000)
        held = [(held, lease) for held, lease in q.leases.items() if not lease.lost.is_set()]
        beats = []
        for (c, token), lease in held:
            keys = [q.key(c, "lock"), q.key(c, "fence"), q.key(c, "stop"), q.ready]
            args: list[str | int] = [token, q.lease_ms, lease.entry_id, GROUP, q.consumer]
            beats.append(q.extends.send(c, keys, args))
        replies = await asyncio.gather(*beats, return_exceptions=True)
        failed: BaseException | None = None
        for ((c, token), lease), reply in zip(held, replies, strict=True):
            if isinstance(reply, BaseException):  # a RedisError (or shutting down)
                failed = reply
                continue
            if q.leases.get((c, token)) is not lease:
                continue  # let go meanwhile
            state = int(reply[0])
            if state == 2:
                q.stop_here(c)
            if state == 0:
                log.warning("conversation %s: lease lost to another process; stopping here", c)
                if lease.signal is not None:
                    lease.signal.lose()  # the turn is the new holder's: nothing more of it here
                lease.lost.set()
        if failed is not None:
            cancelled_meanwhile()
            log.warning("%d leases not extended (%s)", len(held), describe(failed))


async def _abandon(q: HeldQueue, c: str, token: int, entry_id: str) -> None:
    """Shutting down: let go at once, so another process takes what is queued now."""
    try:
        async with asyncio.timeout(SHUTDOWN_S):
            await q.scripts["ABANDON"](
                keys=[q.key(c, "lock"), q.key(c, "in"), q.key(c, "turn"), q.ready]
                + [q.key(c, "fence")],
                args=[token, c],
            )
            await q.redis.xack(q.ready, GROUP, entry_id)
    except (RedisError, TimeoutError) as exc:
        log.warning("conversation %s: not let go at shutdown (%s)", c, describe(exc))
