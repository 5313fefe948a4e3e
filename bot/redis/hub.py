"""`RedisEventHub`: a conversation's frames numbered and kept in Redis, fanned out to every process.

A widget on process A sees the turn that process B runs, and resumes by seq on process C.
Publishing is one script (hub_lua.py): INCR the seq, XADD the frame to the conversation's
stream (trimmed to `replay_events`), PUBLISH it if another process has a socket attached to
the conversation (each process counts its own in Redis on attach and detach); frames published while a call is in flight go
together in the next (hub_outbox.py). Each process subscribes to the channels of the
conversations it has sockets for, on one pub/sub connection read by one task.

Attach subscribes first, waits for Redis to confirm, then reads the seq and the kept frames in
one script; frames arriving meanwhile are held and pushed after `attach` returns (skipping those
up to its seq). Pub/sub is at most once: a frame that skips a seq (a reconnect lost some) makes
the reader fetch the missing ones from the stream first, so sockets still see every kept frame
in order. `publish` returns once this process's own sockets have been handed the frame, as the
in-memory hub does: it hands it to them itself once every frame before it was handed out (the
reader skips the echo, if other processes' sockets made it published). Frames before it still
on their way (another process published them) come through the reader; if they are late (a
reconnect), publish fetches them from the stream rather than leave its own frame unsent.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final

from redis.asyncio import Redis
from redis.exceptions import RedisError

from adapters.hub import Attached, Subscriber
from adapters.hub.base import CLEARING_TYPE, MAX_IDLE_CONVERSATIONS, encode_frame, replay_slot
from bot.redis import hub_lua
from bot.redis.client import LuaScript, describe, guarded
from bot.redis.hub_outbox import Outbox
from bot.redis.hub_reader import read_frames

log = logging.getLogger(__name__)

TTL_S: Final = 86400.0  # a conversation nobody publishes to or watches is forgotten after a day
HEARTBEAT_S: Final = 60.0  # attached conversations refresh their TTLs this often
LOCAL_DELIVERY_S: Final = 1.0  # publish waits at most this long for its own process's sockets


@dataclass(eq=False, slots=True)
class _Sub:
    subscriber: Subscriber
    last: int = 0  # the newest seq it was given
    held: list[tuple[int, str]] | None = field(default_factory=list)  # None once attach returned


@dataclass(eq=False, slots=True)
class _Conversation:
    subs: dict[Subscriber, _Sub] = field(default_factory=dict)
    subscribed: asyncio.Future[None] | None = None
    delivered: int = 0  # newest seq the reader handed out
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def notify(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()


def _next_for_all(conv: _Conversation, seq: int) -> bool:
    """Whether every socket was handed every frame before `seq` (or holds it until attached)."""
    if conv.delivered == seq - 1:
        return True
    return all(sub.held is None and sub.last >= seq - 1 for sub in conv.subs.values())


class RedisEventHub:
    """`async with RedisEventHub(redis, reader, prefix=...) as hub:` runs its pub/sub reader."""

    def __init__(
        self,
        redis: Redis,
        reader: Redis,
        *,
        prefix: str,
        replay_events: int,
        max_idle: int = MAX_IDLE_CONVERSATIONS,
        ttl_s: float = TTL_S,
        heartbeat_s: float = HEARTBEAT_S,
    ) -> None:
        self.redis = redis
        # seqs live in Redis and outlive every process (a Redis that restarts empty starts them
        # again: a client then falls back to `seq` below its own)
        self.epoch = "r" + hashlib.sha256(prefix.encode()).hexdigest()[:15]
        self._heartbeat_s = heartbeat_s
        self.base = f"{prefix}hub:"
        self._replay_events = replay_events
        self._max_idle = max_idle
        self._ttl_ms = int(ttl_s * 1000)
        self._pubsub = reader.pubsub()
        # Which process: Redis publishes a frame only when another one has a socket for it. With
        # nothing kept there is nothing to fetch a late frame from: then ours come back too.
        self._me = uuid.uuid4().hex[:16]
        self._outbox = Outbox(
            redis,
            self._key,
            self.base,
            (replay_events, self._ttl_ms, max_idle),
            self._me if replay_events > 0 else "",
        )
        self._attach = LuaScript(redis, hub_lua.ATTACH)
        self._detach = LuaScript(redis, hub_lua.DETACH)
        self._conversations: dict[str, _Conversation] = {}
        self._task: asyncio.Task[None] | None = None
        self.subscribed_once = asyncio.Event()  # the reader waits for a connection to read
        self._dropped: list[tuple[str, Subscriber]] = []  # refused a held frame
        # One (un)subscribe at a time: the first ones, side by side, would each open a
        # connection for the PubSub and all but one be lost with theirs.
        self._subscribing = asyncio.Lock()
        self._wake = asyncio.Event()

    async def __aenter__(self) -> RedisEventHub:
        self._task = asyncio.create_task(self._run(), name="redis-event-hub")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._outbox.close()
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task])
        await self._pubsub.aclose()

    async def attach(
        self, conversation: str, subscriber: Subscriber, resume_after: int | None
    ) -> Attached:
        conv = self._conversations.setdefault(conversation, _Conversation())
        sub = conv.subs[subscriber] = _Sub(subscriber)
        try:
            async with guarded("attaching a web socket"):
                if conv.subscribed is None:
                    conv.subscribed = asyncio.get_running_loop().create_future()
                    async with self._subscribing:
                        await self._pubsub.subscribe(self.base + conversation)
                    self.subscribed_once.set()
                async with asyncio.timeout(5):
                    await asyncio.shield(conv.subscribed)
                seq, floor, *replay = await self._attach(
                    keys=[self._key(conversation, p) for p in ("seq", "s", "where")]
                    + [f"{self.base}idle", self._key(conversation, "slots")],
                    args=[
                        -1 if resume_after is None else resume_after,
                        self._ttl_ms,
                        conversation,
                        self._me,
                    ],
                )
        except BaseException:
            await self._forget(conversation, subscriber)
            raise
        sub.last = int(seq)
        # after the caller has pushed ready and the replay (it does not await in between)
        asyncio.get_running_loop().call_soon(self._release_held, conversation, sub)
        # with nothing kept, every frame is let go of
        return Attached(sub.last, replay, int(floor) if self._replay_events else sub.last)

    async def detach(self, conversation: str, subscriber: Subscriber) -> None:
        conv = self._conversations.get(conversation)
        if conv is None or subscriber not in conv.subs:
            return
        await self._forget(conversation, subscriber)
        await self._record_detach(conversation)

    async def _record_detach(self, conversation: str) -> None:
        try:
            await self._detach(
                keys=[self._key(conversation, "where"), f"{self.base}idle", f"{self.base}clock"],
                args=[conversation, self._max_idle, self.base, self._me],
            )
        except RedisError as exc:
            log.warning("event hub: detach from %s not recorded: %s", conversation, describe(exc))

    async def publish(
        self, conversation: str, type: str, fields: Mapping[str, Any], *, retry: bool = True
    ) -> int:
        fields = {k: v for k, v in fields.items() if k != "seq"}
        head = encode_frame(conversation, type, fields, 0)[:-2]  # the seq goes last
        slot = replay_slot(type, fields, 0)
        slot_name = str(slot[1]) if isinstance(slot, tuple) else ""
        clears = type == CLEARING_TYPE
        seq = await self._outbox.send(conversation, head, slot_name, clears, retry=retry)
        conv = self._conversations.get(conversation)
        if conv is None or not conv.subs:
            return seq
        frame = f"{head}{seq}}}"
        try:  # like the memory hub: ours have it when we return
            async with asyncio.timeout(LOCAL_DELIVERY_S):
                while conv.delivered < seq and conv.subs:
                    if _next_for_all(conv, seq):
                        # Ours are handed it here (pub/sub's echo, if any, is skipped): in
                        # order, as every frame before it was handed out.
                        await self._hand_out(conversation, conv, [(seq, frame)])
                        return seq
                    await conv.changed.wait()  # the reader, or another publish, hands some out
        except TimeoutError:
            await self._late(conversation, conv, seq, frame)
        return seq

    async def _late(self, conversation: str, conv: _Conversation, seq: int, frame: str) -> None:
        """The frames before ours did not come (the reader reconnects): from the stream."""
        ready = [sub.last for sub in conv.subs.values() if sub.held is None]
        try:
            frames = await self._kept(conversation, min(ready, default=seq - 1), seq - 1)
        except RedisError as exc:
            log.warning("event hub: frames before %s of %s: %s", seq, conversation, describe(exc))
            frames = []  # better ours out of order than never
        await self._hand_out(conversation, conv, [*frames, (seq, frame)])

    def _key(self, conversation: str, part: str) -> str:
        return f"{self.base}{conversation}:{part}"

    def _release_held(self, conversation: str, sub: _Sub) -> None:
        held, sub.held = sub.held or [], None
        for seq, frame in held:
            if not self._push(sub, seq, frame):
                self._dropped.append((conversation, sub.subscriber))
                self._wake.set()  # the reader records it
                return

    def _push(self, sub: _Sub, seq: int, frame: str) -> bool:
        if seq <= sub.last:
            return True
        sub.last = seq
        return sub.subscriber.push(frame)

    async def _forget(self, conversation: str, subscriber: Subscriber) -> None:
        conv = self._conversations.get(conversation)
        if conv is None:
            return
        conv.subs.pop(subscriber, None)
        conv.notify()
        if conv.subs:
            return
        del self._conversations[conversation]
        if conv.subscribed is not None:
            try:
                async with self._subscribing:
                    await self._pubsub.unsubscribe(self.base + conversation)
            except RedisError:
                pass  # the connection is gone, and its subscriptions with it

    # -- the reader ---------------------------------------------------------------------
    async def _run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(read_frames(self, self._pubsub))  # with its reconnects
            group.create_task(self._heartbeat())
            group.create_task(self._record_drops())

    async def _record_drops(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._dropped:
                conversation, subscriber = self._dropped.pop()
                if subscriber in getattr(self._conversations.get(conversation), "subs", {}):
                    await self._forget(conversation, subscriber)
                    await self._record_detach(conversation)

    async def _heartbeat(self) -> None:
        """Keep the keys of watched conversations (a socket open for days loses nothing)."""
        while True:
            await asyncio.sleep(self._heartbeat_s)
            try:
                await self._refresh()
            except RedisError as exc:
                log.warning("event hub heartbeat failed: %s", describe(exc))

    async def _refresh(self) -> None:
        """Refresh the TTLs, and say again which conversations this process has sockets for
        where Redis lost that (a restart without persistence): else the others would stop
        publishing to them, as to nobody."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for conversation, conv in list(self._conversations.items()):
                for part in ("seq", "s", "slots"):
                    pipe.pexpire(self._key(conversation, part), self._ttl_ms)
                if conv.subs:
                    pipe.eval(  # EVAL: rare, and a restarted Redis knows no script
                        hub_lua.PRESENT,
                        1,
                        self._key(conversation, "where"),
                        self._me,
                        len(conv.subs),
                        self._ttl_ms,
                    )
            await pipe.execute()

    async def resubscribe(self, pubsub: Any) -> None:
        channels = [self.base + c for c, conv in self._conversations.items() if conv.subscribed]
        if channels:
            async with self._subscribing:
                await pubsub.subscribe(*channels)
            await self._refresh()  # Redis may have restarted empty

    def confirmed(self, channel: str) -> None:
        conv = self._conversations.get(channel.removeprefix(self.base))
        if conv is not None and conv.subscribed is not None and not conv.subscribed.done():
            conv.subscribed.set_result(None)

    async def deliver(self, channel: str, frame: str) -> None:
        """One frame from pub/sub; missing ones before it are fetched from the stream first."""
        conversation = channel.removeprefix(self.base)
        conv = self._conversations.get(conversation)
        if conv is None:
            return
        seq = int(frame[frame.rindex(":") + 1 : -1])
        if seq <= conv.delivered:
            return  # handed out already: published here, or fetched to fill a gap
        frames = [(seq, frame)]
        ready = [sub.last for sub in conv.subs.values() if sub.held is None]
        oldest = min(ready, default=seq - 1)
        if oldest < seq - 1:
            frames = await self._kept(conversation, oldest, seq - 1) + frames
        await self._hand_out(conversation, conv, frames)

    async def catch_up(self) -> None:
        """After a reconnect: whatever was published while the connection was down."""
        for conversation, conv in list(self._conversations.items()):
            ready = [sub.last for sub in conv.subs.values() if sub.held is None]
            if ready:
                frames = await self._kept(conversation, min(ready), None)
                await self._hand_out(conversation, conv, frames)

    async def _kept(self, conversation: str, after: int, upto: int | None) -> list[tuple[int, str]]:
        entries: list[tuple[str, dict[str, str]]] = await self.redis.xrange(
            self._key(conversation, "s"), f"{after + 1}-0", "+" if upto is None else f"{upto}-0"
        )  # type: ignore[assignment]  # decode_responses: str, and a stream always has entries
        return [(int(entry_id.partition("-")[0]), data["f"]) for entry_id, data in entries]

    async def _hand_out(
        self, conversation: str, conv: _Conversation, frames: list[tuple[int, str]]
    ) -> None:
        dead = []
        for sub in list(conv.subs.values()):
            for seq, frame in frames:
                if sub.held is not None:
                    sub.held.append((seq, frame))
                elif not self._push(sub, seq, frame):
                    dead.append(sub.subscriber)
                    break
        if frames:
            conv.delivered = max(conv.delivered, frames[-1][0])
        for subscriber in dead:  # recorded before publish returns, as in the memory hub
            conv.subs[subscriber].held = []  # hand it nothing more meanwhile
            await self._record_detach(conversation)
            await self._forget(conversation, subscriber)
        conv.notify()
