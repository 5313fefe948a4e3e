"""`MemoryEventHub`: the `EventHub` of one process, its conversations in memory (bounded)."""

from __future__ import annotations

import logging
import uuid
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from typing import Any, Final

from adapters.hub.base import (
    CLEARING_TYPE,
    MAX_IDLE_CONVERSATIONS,
    Subscriber,
    encode_frame,
    replay_slot,
)

log = logging.getLogger(__name__)

# Kept frames of idle conversations in all: 10,000 of them with 200 long answers each would
# otherwise be gigabytes.
MAX_IDLE_BYTES: Final = 64 * 2**20


class _Conversation:
    __slots__ = ("_kept", "identity", "seq", "size", "sockets")

    def __init__(self, identity: str) -> None:
        self.identity = identity
        self.seq = 0
        self.size = 0  # characters of the kept frames
        self.sockets: set[Subscriber] = set()
        # slot → (seq, encoded frame); insertion order is seq order because every insert is newest
        self._kept: OrderedDict[Hashable, tuple[int, str]] = OrderedDict()

    def remember(self, slot: Hashable, seq: int, frame: str, limit: int) -> int:
        """Keep `frame`; returns how much `size` changed."""
        before = self.size
        replaced = self._kept.pop(slot, None)
        if replaced is not None:
            self.size -= len(replaced[1])
        self._kept[slot] = (seq, frame)
        self.size += len(frame)
        while len(self._kept) > limit:
            self.size -= len(self._kept.popitem(last=False)[1][1])
        return self.size - before

    def clear(self) -> int:
        """Forget every kept frame; returns how much `size` changed."""
        dropped = self.size
        self._kept.clear()
        self.size = 0
        return -dropped

    def frames_after(self, seq: int) -> list[str]:
        return [frame for kept_seq, frame in self._kept.values() if kept_seq > seq]


class MemoryEventHub:
    """One process: conversations with subscribers are never evicted, idle ones live in an LRU.

    No method awaits anything, so each call is atomic with respect to every other: that alone
    gives the contract's ordering.
    """

    def __init__(
        self,
        *,
        replay_events: int,
        max_idle: int = MAX_IDLE_CONVERSATIONS,
        max_idle_bytes: int = MAX_IDLE_BYTES,
    ) -> None:
        self.epoch = uuid.uuid4().hex[:16]  # a restart numbers every conversation anew
        self._replay_events = replay_events
        self._max_idle = max_idle
        self._max_idle_bytes = max_idle_bytes
        self._live: dict[str, _Conversation] = {}
        self._idle: OrderedDict[str, _Conversation] = OrderedDict()
        self._idle_bytes = 0

    def footprint(self) -> dict[str, int]:
        """How many conversations are kept, and the characters of their frames (tests, metrics)."""
        return {
            "live": len(self._live),
            "idle": len(self._idle),
            "idle_bytes": self._idle_bytes,
        }

    async def attach(
        self, conversation: str, subscriber: Subscriber, resume_after: int | None
    ) -> tuple[int, list[str]]:
        conv = self._live.get(conversation)
        if conv is None:
            conv = self._idle.pop(conversation, None)
            if conv is None:
                conv = _Conversation(conversation)
            else:
                self._idle_bytes -= conv.size
            self._live[conversation] = conv
        conv.sockets.add(subscriber)
        replay = conv.frames_after(resume_after) if resume_after is not None else []
        return conv.seq, replay

    async def detach(self, conversation: str, subscriber: Subscriber) -> None:
        conv = self._live.get(conversation)
        if conv is not None:
            conv.sockets.discard(subscriber)
            self._retire_if_idle(conv)

    async def publish(
        self, conversation: str, type: str, fields: Mapping[str, Any], *, retry: bool = True
    ) -> int:
        conv = self._conversation(conversation)
        seq = conv.seq + 1
        encoded = encode_frame(conversation, type, fields, seq)
        conv.seq = seq
        if self._replay_events:
            grown = conv.clear() if type == CLEARING_TYPE else 0
            grown += conv.remember(
                replay_slot(type, fields, seq), seq, encoded, self._replay_events
            )
            if self._live.get(conversation) is not conv:  # an answer to a tab that has gone
                self._idle_bytes += grown
                self._trim_idle()
        dead = [socket for socket in conv.sockets if not socket.push(encoded)]
        if dead:
            log.debug("dropping %d closed socket(s) from %s", len(dead), conversation)
            conv.sockets.difference_update(dead)
            self._retire_if_idle(conv)
        return seq

    def _conversation(self, identity: str) -> _Conversation:
        conv = self._live.get(identity)
        if conv is not None:
            return conv
        conv = self._idle.get(identity)
        if conv is not None:
            self._idle.move_to_end(identity)
            return conv
        conv = _Conversation(identity)
        self._add_idle(conv)
        return conv

    def _retire_if_idle(self, conv: _Conversation) -> None:
        if not conv.sockets and self._live.get(conv.identity) is conv:
            del self._live[conv.identity]
            self._add_idle(conv)

    def _add_idle(self, conv: _Conversation) -> None:
        self._idle[conv.identity] = conv
        self._idle_bytes += conv.size
        self._trim_idle()

    def _trim_idle(self) -> None:
        while len(self._idle) > self._max_idle or (
            self._idle and self._idle_bytes > self._max_idle_bytes
        ):
            _, forgotten = self._idle.popitem(last=False)
            self._idle_bytes -= forgotten.size
