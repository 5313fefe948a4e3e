"""Script calls asked for meanwhile go to Redis together: the messages queued (ENQUEUE), the
turns of different conversations that end and take their next (NEXT_MANY; conversations_lua.py).

Queueing a message is a script call, and a round trip costs the gateway more CPU than the rest
of queueing. So, as the event hub's outbox does with frames, one call is in flight at a time per
process; the messages queued while it is (any conversation) wait and go in the next call, in the
order they were queued, and the script queues them one after the other as separate calls would.
A lone message goes at once (the next loop iteration). Each message gets its own reply; if the
call fails (Redis away), each waiting caller gets the error. Not retried here: a caller retries
if it should (drain.py's finish), or has its sender try later (enqueue), as before.

`settle` sees every reply in the sending task, before its caller does: a reply that claimed a
conversation for this process must start its drain even if the caller was cancelled meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from redis.asyncio.client import Redis
from redis.exceptions import RedisError, ResponseError

from bot.redis.client import LuaScript, cancelled_meanwhile

MAX_MESSAGES: Final = 50  # per call: a script runs alone on the server, keep each one short


@dataclass(slots=True)
class _Queued:
    conversation: str
    keys: Sequence[str]
    args: Sequence[str | int]
    reply: asyncio.Future[list[Any]]


class ScriptBatch:
    """One of the scripts that take groups of keys and arguments (conversations_lua._each)."""

    def __init__(
        self,
        redis: Redis,
        script: str,
        shape: tuple[int, int],  # keys, arguments per group
        settle: Callable[[str, list[Any]], None] = lambda conversation, reply: None,
    ) -> None:
        self._script = LuaScript(redis, script)
        self._shape = shape
        self._settle = settle
        self._waiting: list[_Queued] = []
        self._sender: asyncio.Task[None] | None = None

    def send(
        self, conversation: str, keys: Sequence[str], args: Sequence[str | int]
    ) -> asyncio.Future[list[Any]]:
        """The script's reply for this message; a RedisError if the call failed."""
        if (len(keys), len(args)) != self._shape:
            raise ValueError("a batched script takes a group of its keys and arguments per call")
        reply: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Queued(conversation, keys, args, reply))
        if self._sender is None:
            self._sender = asyncio.create_task(self._send_all(), name="redis-script-batch")
        return reply

    async def _send_all(self) -> None:
        batch: list[_Queued] = []
        try:
            while self._waiting:
                batch, self._waiting = self._waiting[:MAX_MESSAGES], self._waiting[MAX_MESSAGES:]
                # a caller cancelled before its call went is not sent, as an unbatched call was
                # not: a drain cancelled meanwhile lets its lease go (ABANDON) instead
                batch = [queued for queued in batch if not queued.reply.cancelled()]
                if not batch:
                    continue
                keys: list[str] = []
                args: list[str | int] = []
                for queued in batch:
                    keys += queued.keys
                    args += queued.args
                try:
                    replies: list[Any] = await self._script(keys=keys, args=args)
                except RedisError as exc:
                    cancelled_meanwhile()
                    for queued in batch:
                        if not queued.reply.done():
                            queued.reply.set_exception(exc)
                    continue
                for queued, reply in zip(batch, replies, strict=True):
                    if int(reply[0]) == -2:  # this message's script failed, not the others'
                        if not queued.reply.done():
                            queued.reply.set_exception(ResponseError(str(reply[1])))
                        continue
                    self._settle(queued.conversation, reply)
                    if not queued.reply.done():  # its caller was cancelled meanwhile
                        queued.reply.set_result(reply)
        except BaseException:
            for queued in batch + self._waiting:  # cancelled (shutdown): nobody sends them
                queued.reply.cancel()
            self._waiting = []
            raise
        finally:
            self._sender = None
