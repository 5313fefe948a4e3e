"""One conversation drained by the process holding its lease: batch after batch, then let go."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Final

from redis.exceptions import RedisError

from bot.conversations import TurnSignal
from bot.redis.client import cancelled_meanwhile, describe

if TYPE_CHECKING:
    from bot.redis.conversations import RedisConversations

log = logging.getLogger(__name__)

RETRY_S: Final = 0.2
SHUTDOWN_S: Final = 2.0


async def drain(q: RedisConversations, c: str, token: int, entry_id: str) -> bool:
    """Run `c`'s turns while holding its lease. True: drained and let go (ack the entry);
    False: the lease was lost or Redis failed (the entry stays pending for a reclaim)."""
    lost = asyncio.Event()
    async with asyncio.TaskGroup() as group:
        beat = group.create_task(_heartbeat(q, c, token, entry_id, lost))
        try:
            return await _turns(q, c, token, lost)
        except asyncio.CancelledError:
            await _abandon(q, c, token, entry_id)
            raise
        except RedisError as exc:
            cancelled_meanwhile()
            log.warning("conversation %s: Redis failed mid-drain (%s)", c, describe(exc))
            return False
        finally:
            beat.cancel()


async def _turns(q: RedisConversations, c: str, token: int, lost: asyncio.Event) -> bool:
    if q.coalesce_ms:
        await asyncio.sleep(q.coalesce_ms / 1000)  # let a burst arrive
    keys = {part: q.key(c, part) for part in ("lock", "fence", "in", "turn", "stop")}
    while not lost.is_set():
        recorded: str | None = await q.redis.get(keys["turn"])  # type: ignore[assignment]
        if recorded is not None:  # a batch the last holder began and never finished
            batch, resumed = q.load_batch(recorded), True
        else:
            queued: list[str] = await q.redis.lrange(keys["in"], 0, q.max_queued - 1)  # type: ignore[assignment]
            if not queued:
                released = await q.scripts["RELEASE"](
                    keys=[keys["lock"], keys["fence"], keys["in"], keys["turn"], f"{q.base}busy"],
                    args=[token, q.lease_ms, c],
                )
                if int(released):
                    return True
                continue  # a message arrived as we looked
            taken, batch = q.next_batch(queued)
            picks = [part for i in taken for part in (i, queued[i])]
            outcome = int(
                await q.scripts["TAKE"](
                    keys=[keys["lock"], keys["fence"], keys["in"], keys["turn"], keys["stop"]],
                    args=[token, q.lease_ms, q.batch_json(batch), len(taken), *picks],
                )
            )
            if outcome == 0:
                return False
            if outcome < 0:
                continue  # a /stop emptied the queue meanwhile
            resumed = False
        log.debug("conversation %s: a turn of %d message(s) runs here", c, len(batch))
        await _run(q, c, batch, resumed)
        if not await _finish(q, keys, token):
            return False
    return False


async def _run(q: RedisConversations, c: str, batch: list, resumed: bool) -> None:  # type: ignore[type-arg]
    run_turn = q.run_turn
    if run_turn is None:
        return
    q.signals[c] = signal = TurnSignal(resumed=resumed)
    try:
        await run_turn(batch, signal)
    except Exception:
        # one conversation's failure (say, its channel cannot deliver) never stops others
        log.exception("turn in %s failed to deliver", c)
    finally:
        q.signals.pop(c, None)


async def _finish(q: RedisConversations, keys: dict[str, str], token: int) -> bool:
    """The turn is answered: forget its batch, retrying through a Redis restart (a batch left
    recorded would be taken over as unfinished)."""
    deadline = asyncio.get_running_loop().time() + q.lease_ms / 1000
    while True:
        try:
            return bool(
                int(
                    await q.scripts["FINISH"](
                        keys=[keys["lock"], keys["fence"], keys["turn"]], args=[token, q.lease_ms]
                    )
                )
            )
        except RedisError:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(RETRY_S)


async def _heartbeat(
    q: RedisConversations, c: str, token: int, entry_id: str, lost: asyncio.Event
) -> None:
    """Extend the lease, keep the stream entry ours (no reclaim while we live), read /stop."""
    while True:
        await asyncio.sleep(q.lease_ms / 3000)
        try:
            state = int(
                await q.scripts["EXTEND"](
                    keys=[q.key(c, "lock"), q.key(c, "fence"), q.key(c, "stop")],
                    args=[token, q.lease_ms],
                )
            )
            await q.redis.xclaim(q.ready, "workers", q.consumer, 0, [entry_id], justid=True)
        except RedisError as exc:
            cancelled_meanwhile()
            log.warning("conversation %s: lease not extended (%s)", c, describe(exc))
            continue
        if state == 2:
            q.stop_here(c)
        if state == 0:
            log.warning("conversation %s: lease lost to another process; stopping here", c)
            if (running := q.signals.get(c)) is not None:
                running.lose()  # the turn is the new holder's: nothing more of it from here
            lost.set()
            return


async def _abandon(q: RedisConversations, c: str, token: int, entry_id: str) -> None:
    """Shutting down: let go at once, so another process takes what is queued now."""
    try:
        async with asyncio.timeout(SHUTDOWN_S):
            await q.scripts["ABANDON"](
                keys=[q.key(c, "lock"), q.key(c, "in"), q.key(c, "turn"), q.ready]
                + [q.key(c, "fence")],
                args=[token, c],
            )
            await q.redis.xack(q.ready, "workers", entry_id)
    except (RedisError, TimeoutError) as exc:
        log.warning("conversation %s: not let go at shutdown (%s)", c, describe(exc))
