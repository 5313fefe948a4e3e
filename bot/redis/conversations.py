"""`RedisConversations`: the conversation queue shared by every process, one turn at a time each.

Messages are queued on their conversation's list (conversations_lua.py). "This conversation
has work" goes on one stream read by a consumer group, so each entry reaches one process; that
process takes the conversation's lease (a fenced lock) and drains it turn by turn, coalescing as
the embedded queue does. The process queuing a message may read the entry itself in the same
script (`serve_here`: a web socket's message, so the turn runs beside its socket), and a turn
is then one more script (NEXT: finish this batch, take the next or let go). While it holds the lease a heartbeat extends it and keeps the stream
entry its own. If the process dies, the lease expires and the entry, still pending, is taken by
another process with XAUTOCLAIM; the batch the dead one was running is still recorded, and is
handed to the turn runner marked `resumed`. A stale holder (a stalled process whose lease ran
out) can change nothing: every script checks its token. `/stop` drops the list and reaches the
running turn wherever it runs: pub/sub for speed, and a flag the heartbeat reads in case that
one message was lost.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any, Final

from redis.asyncio import Redis
from redis.exceptions import RedisError, ResponseError

from adapters.base import InboundMessage
from bot.pipeline.conversation_state import ConversationState
from bot.pipeline.conversations import (
    MAX_QUEUED,
    MAX_TURN_CHARS,
    MAX_TURN_MESSAGES,
    Held,
    QueueFull,
    RunTurn,
    Stopped,
    TurnSignal,
    next_batch,
)
from bot.redis import conversations_lua as lua
from bot.redis import messages
from bot.redis.client import BLOCK_MS, LuaScript, cancelled_meanwhile, describe, guarded
from bot.redis.conversations_lua import GROUP
from bot.redis.dedup import RedisDedup, once_key
from bot.redis.drain import Lease, drain, heartbeats
from bot.redis.script_batch import ScriptBatch
from bot.redis.states import state_key
from bot.redis.stops import listen_for_stops

log = logging.getLogger(__name__)

IDLE_POLL_S: Final = 0.02  # wait_idle (tests, shutdown) polls the shared state
BACKOFF_S: Final = (0.1, 2.0)
CLAIM_EVERY_S: Final = 1.0
ONCE_MS: Final = 600_000  # an event queued is not queued again for this long (retries, resends)


class RedisConversations:
    def __init__(
        self,
        redis: Redis,
        reader: Redis,
        *,
        prefix: str,
        lease_s: float = 5.0,
        coalesce_ms: int = 0,
        max_turn_chars: int = MAX_TURN_CHARS,
        max_turn_messages: int = MAX_TURN_MESSAGES,
        max_queued: int = MAX_QUEUED,
        serve_here: Callable[[InboundMessage], bool] = lambda message: True,
        dedup: RedisDedup | None = None,
        stopped: Callable[[str], object] = lambda conversation_key: None,
        task_stopped: Callable[[str, str], object] = lambda conversation_key, task_id: None,
        states: ConversationState | None = None,
    ) -> None:
        """`serve_here(message)`: a message that finds its conversation idle has its turn run by
        the process that queued it (no reader's round trip; a web socket's frames stay in its
        process). False: the consumer group hands it to whichever process reads first.
        `dedup`: `enqueue_new` claims a plain message's event as it queues it. `stopped(key)`
        and `task_stopped(key, task id)` hear a /stop or a TaskStop asked on any process.
        `states`: the conversation states in Redis under this prefix (bot/redis/states.py):
        `enqueue_new` holds a message whose conversation's mode is not bot, in its script."""
        self.redis, self.reader = redis, reader
        self.prefix, self.base = prefix, f"{prefix}q:"
        self.lease_ms = int(lease_s * 1000)
        # A dead holder's entry is claimed once idle for a lease: its heartbeat (which keeps the
        # entry its own) stopped that long ago, so its lock has lapsed too; looked for 4 times
        # a lease (at most every CLAIM_EVERY_S), so a takeover comes about a lease after a death.
        self.claim_every_s = min(CLAIM_EVERY_S, lease_s / 4)
        self.coalesce_ms = coalesce_ms
        self.max_turn_chars, self.max_turn_messages = max_turn_chars, max_turn_messages
        self.max_queued = max_queued
        self.serve_here = serve_here
        self.dedup = dedup
        self.states = states
        self.consumer = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.started = asyncio.Event()
        self._stopped = stopped
        self._task_stopped = task_stopped
        self.signals: dict[str, TurnSignal] = {}  # the turns running in this process
        # drains running here, by conversation: two, while one lost its lease to a newer one here
        self._draining: Counter[str] = Counter()
        self.scripts = {
            name: LuaScript(redis, getattr(lua, name))
            for name in ("CLAIM", "NEXT", "STOP", "ABANDON")
        }
        # ENQUEUE, NEXT, TAKE and the lease heartbeats: the calls asked for while one is in
        # flight go together in the next
        self.queueing = ScriptBatch(redis, lua.ENQUEUE, lua.ENQUEUE_SHAPE, self._claimed)
        self.nexts = ScriptBatch(redis, lua.NEXT_MANY, lua.NEXT_SHAPE)
        self.takes = ScriptBatch(redis, lua.TAKE_MANY, lua.TAKE_SHAPE)
        self.extends = ScriptBatch(redis, lua.EXTEND_MANY, lua.EXTEND_SHAPE)
        self.leases: dict[tuple[str, int], Lease] = {}  # held here: (conversation, token)
        self.run_turn: RunTurn | None = None
        self._tasks: asyncio.TaskGroup | None = None  # run()'s: the drains of this process

    def key(self, conversation: str, part: str) -> str:
        return f"{self.base}{conversation}:{part}"

    @property
    def ready(self) -> str:
        return f"{self.base}ready"

    @property
    def stop_channel(self) -> str:
        return f"{self.base}stop"

    async def run(self, run_turn: RunTurn) -> None:
        self.run_turn = run_turn
        try:
            async with asyncio.TaskGroup() as group:
                self._tasks = group
                stops = listen_for_stops(
                    self.reader,
                    self.stop_channel,
                    self.task_stop_channel,
                    stop=self._stop_heard,
                    stop_task=self._task_stopped,
                )
                group.create_task(stops)
                group.create_task(heartbeats(self))
                group.create_task(self._take_work(group))
        finally:
            self._tasks = None
            self.run_turn = None
            self.started.clear()

    async def enqueue(self, message: InboundMessage) -> None:
        await self._enqueue(message, once_key(self.prefix, message.event_id), ONCE_MS)

    def claims_for(self, dedup: object) -> bool:
        return dedup is self.dedup and self.dedup is not None

    def holds_for(self, states: object) -> bool:
        return states is self.states and self.states is not None

    async def enqueue_new(self, message: InboundMessage) -> bool | Held:
        """The dedup claim (`SET NX PX` of RedisDedup) taken, and the conversation's mode read,
        by the script that queues."""
        if self.dedup is None:
            raise RuntimeError("enqueue_new needs the RedisDedup whose claims it takes")
        if self.dedup.ttl_ms < 1:  # a claim that expires at once holds nothing (RedisDedup)
            once, once_ms = once_key(self.prefix, message.event_id), ONCE_MS
        else:
            once, once_ms = self.dedup.key(message.event_id), self.dedup.ttl_ms
        return await self._enqueue(message, once, once_ms, held=self.states is not None)

    async def _enqueue(
        self, message: InboundMessage, once: str, once_ms: int, *, held: bool = False
    ) -> bool | Held:
        """False: `once` was set already; `Held`: `held` and the conversation's mode is not
        bot, so nothing was queued (see conversations_lua.ENQUEUE)."""
        if self.run_turn is None or self._tasks is None:
            raise RuntimeError("the conversation queue is not running: start its run() first")
        c = message.conversation_key
        args = self.claim_args(c, "", "wait" if self.coalesce_ms else "look")
        here = self.consumer if self.serve_here(message) else ""
        args += [messages.dump(message), here, once_ms, "1" if held else ""]
        keys = [*self.claim_keys(c)[:7], once, state_key(self.prefix, c)]
        async with guarded("queueing a message"):
            reply = await self.queueing.send(c, keys, args)
        status = int(reply[0])
        if status == 3:
            return Held(str(reply[1]))
        if not status:
            log.warning("%s has %d messages waiting; refusing more", c, self.max_queued)
            raise QueueFull(c, self.max_queued)
        return status > 0

    def _claimed(self, c: str, reply: list[Any]) -> None:
        """ENQUEUE's reply for a message of `c`: this process read a "has work" entry (status
        2), so it serves it, even if the caller that queued the message is gone meanwhile."""
        tasks = self._tasks
        if int(reply[0]) != 2 or tasks is None:  # stopped meanwhile: the entry is reclaimed
            return
        entry_id, entry_c, *claimed = reply[1:]
        mine = claimed if entry_c == c else None
        tasks.create_task(self._serve(entry_id, entry_c, reclaimed=False, claimed=mine))

    async def stop(self, conversation_key: str) -> Stopped:
        c = conversation_key
        async with guarded("stopping a conversation"):
            dropped, running, queued = await self.scripts["STOP"](
                keys=[self.key(c, "in"), self.key(c, "lock"), self.key(c, "stop")]
                + [f"{self.base}busy"],
                args=[c, self.lease_ms * 3, self.stop_channel],
            )
        self.stop_here(c)  # at once if it runs here; others hear it on the channel
        return Stopped(int(dropped), bool(running), _dropped(queued))

    async def stop_task(self, conversation_key: str, task_id: str) -> None:
        """TaskStop for a specialist another process runs: every process hears it."""
        payload = json.dumps({"conversation": conversation_key, "task_id": task_id})
        async with guarded("stopping a task"):
            await self.redis.publish(self.task_stop_channel, payload)

    @property
    def task_stop_channel(self) -> str:
        return f"{self.base}taskstop"

    def _stop_heard(self, conversation_key: str) -> None:
        """A /stop asked on any process: the turn, if it runs here, and what else listens."""
        self.stop_here(conversation_key)
        self._stopped(conversation_key)

    def stop_here(self, conversation_key: str) -> None:
        signal = self.signals.get(conversation_key)
        if signal is not None:
            signal.stop()

    async def wait_idle(self) -> None:
        """Until no conversation of any process has work (tests, shutdown): the state is in
        Redis, shared by processes, so it is polled; no event could carry it."""
        while self._draining or await self.redis.zcard(f"{self.base}busy"):  # noqa: ASYNC110
            await asyncio.sleep(IDLE_POLL_S)

    def busy_here(self) -> bool:
        """This process's turns only: what other processes run does not wait on its loop."""
        return bool(self._draining)

    # -- taking work ----------------------------------------------------------------------
    async def _take_work(self, group: asyncio.TaskGroup) -> None:
        """Read "has work" entries (reclaiming a dead process's first) and drain each."""
        backoff = BACKOFF_S[0]
        created = False
        loop = asyncio.get_running_loop()
        next_claim = 0.0
        while True:
            try:
                if not created:
                    await self._create_group()
                    created = True
                    self.started.set()
                now = loop.time()
                if now >= next_claim:  # a dead process's entries, idle past its lease
                    next_claim = now + self.claim_every_s
                    claimed: Any = await self.reader.xautoclaim(
                        self.ready, GROUP, self.consumer, self.lease_ms, "0-0", count=10
                    )
                    for entry_id, fields in claimed[1]:
                        group.create_task(self._serve(entry_id, fields["c"], reclaimed=True))
                block = min(BLOCK_MS, int(self.claim_every_s * 1000))  # back for the next claim
                read: Any = await self.reader.xreadgroup(
                    GROUP, self.consumer, {self.ready: ">"}, count=10, block=block
                )
                for _, entries in read or []:
                    for entry_id, fields in entries:
                        group.create_task(self._serve(entry_id, fields["c"], reclaimed=False))
                backoff = BACKOFF_S[0]
            except RedisError as exc:
                cancelled_meanwhile()
                if isinstance(exc, ResponseError):  # NOGROUP: a Redis restarted empty
                    created = False
                log.warning("conversation queue: Redis failed (%s); retrying", describe(exc))
                self.started.set()  # enqueue refuses with TryLater meanwhile
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_S[1])

    async def _create_group(self) -> None:
        try:
            await self.redis.xgroup_create(self.ready, GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def claim_keys(self, c: str) -> list[str]:
        """The keys of the CLAIM and NEXT scripts (conversations_lua.py), in order; ENQUEUE's
        begin with the first seven."""
        keys = [self.key(c, part) for part in ("lock", "fence", "in", "turn", "stop")]
        return [*keys, f"{self.base}busy", self.ready, state_key(self.prefix, c)]

    def claim_args(self, c: str, entry_id: str, flag: str, token: int = 0) -> list[str | int]:
        return [token, self.lease_ms, c, entry_id, GROUP, self.max_queued, flag, ""]

    async def _serve(
        self, entry_id: str, c: str, *, reclaimed: bool, claimed: list[Any] | None = None
    ) -> None:
        """Claim `c` for a "has work" entry (`claimed`: ENQUEUE did) and drain it.

        CLAIM acks the entry when a live holder drains `c` (not when reclaimed: that holder's
        lease decides); the drain acks it when it lets go, and leaves it pending otherwise.
        """
        try:
            if claimed is None:
                flag = "reclaimed" if reclaimed else ("wait" if self.coalesce_ms else "look")
                args = self.claim_args(c, entry_id, flag)
                claimed = await self.scripts["CLAIM"](keys=self.claim_keys(c), args=args)
            token, *looked = claimed
            if int(token):
                self._draining[c] += 1
                try:
                    await drain(self, c, int(token), entry_id, looked)
                finally:
                    self._draining[c] -= 1
                    if not self._draining[c]:
                        del self._draining[c]
        except RedisError as exc:
            cancelled_meanwhile()
            log.warning("conversation %s: Redis failed (%s); it is retried", c, describe(exc))

    def next_batch(self, queued: list[str]) -> tuple[list[int], list[InboundMessage]]:
        pending = [messages.load(text) for text in queued]
        taken = next_batch(pending, self.max_turn_chars, self.max_turn_messages)
        return taken, [pending[i] for i in taken]

    def batch_json(self, batch: list[InboundMessage]) -> str:
        return json.dumps([messages.dump(m) for m in batch])

    def load_batch(self, text: str) -> list[InboundMessage]:
        return [messages.load(m) for m in json.loads(text)]


def _dropped(queued: list[str]) -> tuple[InboundMessage, ...]:
    """The messages a stop dropped, as the STOP script read them from the queue."""
    found = []
    for text in queued:
        try:
            found.append(messages.load(text))
        except (ValueError, TypeError, KeyError):  # telling senders is best effort: the drop holds
            log.warning("a dropped message could not be read back: %.80r", text)
    return tuple(found)
