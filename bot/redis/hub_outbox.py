"""The event hub's outbox: frames published meanwhile go to Redis together, in one script call.

A frame is one round trip to Redis (numbered, kept, fanned out: hub_lua.PUBLISH), and a round
trip costs the gateway more CPU than the rest of publishing. So one call is in flight at a time
per process; the frames published while it is (any conversation) wait and go in the next call,
in the order they were published. A lone frame goes at once (the next loop iteration); under
load a call carries many. Retried through a Redis restart, as the frame is the user's answer:
each frame's `once` key keeps a retry whose first attempt ran from numbering it twice. A frame
sent with `retry=False` (the user's own message, which the channel can still refuse) is not
waited through an outage: the first failure fails it with `RedisUnavailable` (a `TryLater`) and
the call is retried without it. (A *timeout* may hide a call that ran: then the refused frame
may be kept after all, and a resend shows the message twice in the transcript, answered once.)
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from redis.asyncio.client import Redis
from redis.exceptions import RedisError

from adapters.base import ChannelError
from bot.redis import hub_lua
from bot.redis.client import LuaScript, RedisUnavailable, cancelled_meanwhile, describe

PUBLISH_RETRY_S: Final = 10.0  # a Redis restart; past it the frames fail as a ChannelError
PUBLISH_BACKOFF_S: Final = 0.2
MAX_FRAMES: Final = 100  # per call: a script runs alone on the server, keep each one short


@dataclass(slots=True)
class Frame:
    conversation: str
    head: str  # the encoded frame up to its seq
    slot: str
    clears: bool
    sent: asyncio.Future[int]
    retry: bool  # False: refused at the first failure rather than waited through an outage
    once: str  # its key against a retried call numbering it twice


class Outbox:
    def __init__(
        self,
        redis: Redis,
        key: Callable[[str, str], str],
        base: str,
        settings: tuple[int, int, int],  # replay_events ttl_ms max_idle
        me: str,  # this process (hub_lua.PUBLISH)
    ) -> None:
        self._script = LuaScript(redis, hub_lua.PUBLISH)
        self._key = key
        self._shared = [f"{base}idle", f"{base}clock"]
        self._args: list[str | int] = [*settings, base, me]
        self._once = f"{base}once:{uuid.uuid4().hex}:"  # + a count: unique, cheaper than uuid4
        self._count = itertools.count()
        self._waiting: list[Frame] = []
        self._sender: asyncio.Task[None] | None = None

    def send(
        self, conversation: str, head: str, slot: str, clears: bool, *, retry: bool = True
    ) -> asyncio.Future[int]:
        """The frame's seq once Redis numbered it; a ChannelError if Redis stayed away
        (`retry=False`: `RedisUnavailable` if the first call failed)."""
        sent: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        once = f"{self._once}{next(self._count)}"
        self._waiting.append(Frame(conversation, head, slot, clears, sent, retry, once))
        if self._sender is None:
            self._sender = asyncio.create_task(self._send_all(), name="redis-event-hub-outbox")
        return sent

    async def close(self) -> None:
        if self._sender is not None:
            self._sender.cancel()
            await asyncio.wait([self._sender])

    async def _send_all(self) -> None:
        frames: list[Frame] = []
        try:
            while self._waiting:
                frames, self._waiting = self._waiting[:MAX_FRAMES], self._waiting[MAX_FRAMES:]
                try:
                    frames, seqs = await self._call(frames)
                except ChannelError as exc:
                    for frame in frames:
                        if not frame.sent.done():
                            frame.sent.set_exception(exc)
                    continue
                for frame, seq in zip(frames, seqs, strict=True):
                    if not frame.sent.done():
                        frame.sent.set_result(int(seq))
        except BaseException:
            for frame in frames + self._waiting:  # cancelled (shutdown): nobody sends them
                frame.sent.cancel()
            self._waiting = []
            raise
        finally:
            self._sender = None

    async def _call(self, frames: list[Frame]) -> tuple[list[Frame], list[Any]]:
        """The frames Redis took (those refused on a failure are gone) and their seqs."""
        deadline = asyncio.get_running_loop().time() + PUBLISH_RETRY_S
        while True:
            keys, args = list(self._shared), list(self._args)
            for frame in frames:
                c = frame.conversation
                keys += [self._key(c, "seq"), self._key(c, "s"), self._key(c, "slots")]
                keys += [self._key(c, "where"), frame.once]
                args += [frame.head, frame.slot, c, "1" if frame.clears else "0"]
            try:
                seqs: list[Any] = await self._script(keys=keys, args=args)
                return frames, seqs
            except RedisError as exc:
                cancelled_meanwhile()
                frames = _refuse_now(frames, exc)
                if not frames:
                    return [], []
                if asyncio.get_running_loop().time() > deadline:
                    raise ChannelError(f"redis: publishing a frame: {describe(exc)}") from exc
                await asyncio.sleep(PUBLISH_BACKOFF_S)


def _refuse_now(frames: list[Frame], exc: RedisError) -> list[Frame]:
    """Fail the frames sent with `retry=False`; the others, to be retried."""
    for frame in frames:
        if not frame.retry and not frame.sent.done():
            refused = RedisUnavailable(f"redis: publishing a frame: {describe(exc)}")
            frame.sent.set_exception(refused)
    return [frame for frame in frames if frame.retry]
