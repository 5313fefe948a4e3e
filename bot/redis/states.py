"""`RedisStateRecords`: conversation states shared by every process, one Redis hash each.

`<prefix>cs:<conversation>` holds `mode`, `assignee`, `settings` (a JSON object), `version` and
`updated_at`; a conversation nobody changed has no hash. A write is one script that compares
the version and writes the whole state (`SAVE`), so `StoredConversationState` retries a change
that lost the race, as over the store. Nothing is cached in the process. The reads on the hot
path happen inside the queue's own scripts (bot/redis/conversations_lua.py): the mode of a
conversation a message is queued on in ENQUEUE, and the state a turn reads (its language, its
persona and model) in the call that hands the turn its messages. That one is `primed` for the
turn's task: its first read of its own conversation's state takes it instead of a round trip
(the state as of when the turn took its messages; a change meanwhile, say a /model on another
process, counts from the next turn, as one landing just after the read would). A write of
that state, or a second read, goes to Redis.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Final, cast

from redis.asyncio import Redis

from bot.pipeline.conversation_state import StoredConversationState
from bot.redis.client import LuaScript, guarded
from bot.storage.rows import ConversationStateRow

# KEYS: state; ARGV: expected_version mode assignee ('' none) settings updated_at -> 1 | 0
SAVE: Final = """
local stored = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if stored ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'mode', ARGV[2], 'settings', ARGV[4],
  'version', stored + 1, 'updated_at', ARGV[5])
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], 'assignee')
else
  redis.call('HSET', KEYS[1], 'assignee', ARGV[3])
end
return 1
"""


@dataclass(eq=False, slots=True)
class _Primed:
    key: str  # the state's hash
    fields: list[str] | None  # as HGETALL gives them; None once read (or the turn is over)


_PRIMED: ContextVar[_Primed | None] = ContextVar("primed_conversation_state", default=None)


@contextmanager
def primed(key: str, fields: list[str]) -> Iterator[None]:
    """A turn runs inside: its first read of the state hash `key` is `fields` (what the queue's
    script read as it handed the turn its messages), not a round trip."""
    held = _Primed(key, fields)
    token = _PRIMED.set(held)
    try:
        yield
    finally:
        held.fields = None  # tasks the turn started keep the context, not the state
        _PRIMED.reset(token)


def _take_primed(key: str) -> list[str] | None:
    held = _PRIMED.get()
    if held is None or held.key != key:
        return None
    fields, held.fields = held.fields, None
    return fields


def state_key(prefix: str, conversation_key: str) -> str:
    """The hash of a conversation's state (the queue's ENQUEUE reads its `mode`)."""
    return f"{prefix}cs:{conversation_key}"


class RedisStateRecords:
    """The `ConversationStateRecords` role over Redis hashes (compare-and-set in one script)."""

    def __init__(self, redis: Redis, *, prefix: str) -> None:
        self.redis = redis
        self.prefix = prefix
        self._save = LuaScript(redis, SAVE)

    async def load_conversation_state(self, key: str) -> ConversationStateRow | None:
        flat = _take_primed(state_key(self.prefix, key))
        if flat is not None:
            fields = dict(zip(flat[::2], flat[1::2], strict=True))
        else:
            async with guarded("reading a conversation's state"):
                hash_key = state_key(self.prefix, key)
                fields = cast(dict[str, str], await self.redis.hgetall(hash_key))
        if not fields:
            return None
        return ConversationStateRow(
            conversation_key=key,
            mode=fields.get("mode", "bot"),
            assignee=fields.get("assignee") or None,
            settings=json.loads(fields.get("settings") or "{}"),
            version=int(fields.get("version", 0)),
            updated_at=float(fields.get("updated_at", 0.0)),
        )

    async def save_conversation_state(
        self, row: ConversationStateRow, *, expected_version: int
    ) -> bool:
        if row.version != expected_version + 1:
            raise ValueError(f"version {row.version} does not follow {expected_version}")
        settings = json.dumps(dict(row.settings), ensure_ascii=False, sort_keys=True)
        args: list[str | int | float] = [
            expected_version,
            row.mode,
            row.assignee or "",
            settings,
            repr(row.updated_at),
        ]
        _take_primed(state_key(self.prefix, row.conversation_key))  # read it anew after this
        async with guarded("changing a conversation's state"):
            saved = await self._save(keys=[state_key(self.prefix, row.conversation_key)], args=args)
        return bool(saved)


def redis_conversation_state(redis: Redis, *, prefix: str) -> StoredConversationState:
    return StoredConversationState(RedisStateRecords(redis, prefix=prefix))
