"""`MemoryEventHub`: the `EventHub` of one process, its conversations in memory (bounded).

With `replay_idle_s` (the web socket channel's), a conversation that has published nothing for
that long, with no message open (every `message.created` since completed), keeps no frames
but a `conversation.cleared` one: a tab that resumes later gets the stored transcript instead
(adapters/websocket/transcript.py), as for frames evicted. Its seq stays. Why: an idle tab's
conversation otherwise holds its last `replay_events` frames for as long as the tab stays open
(5,000 idle tabs after a turn each: ~10 MB). Conversations are looked at in the order they went
quiet, each time a frame is published: no timer, and nothing done for a quiet process.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Final

from adapters.hub.base import (
    CLEARING_TYPE,
    MAX_IDLE_CONVERSATIONS,
    Attached,
    Subscriber,
    encode_frame,
    replay_slot,
)

log = logging.getLogger(__name__)

# Kept frames of idle conversations in all: 10,000 of them with 200 long answers each would
# otherwise be gigabytes.
MAX_IDLE_BYTES: Final = 64 * 2**20
# quiet conversations trimmed per frame published at most: 10,000 gone quiet together are let go
# of a few at a time (each frame trims more than went quiet since, ~3 us each), not in one stall
TRIMS_PER_FRAME: Final = 64


_OPENING: Final = "message.created"
_CLOSING: Final = frozenset({"message.completed"})


class _Conversation:
    __slots__ = ("_kept", "cleared", "floor", "identity", "open", "seq", "size", "sockets")

    def __init__(self, identity: str) -> None:
        self.identity = identity
        self.seq = 0
        self.size = 0  # characters of the kept frames
        self.sockets: set[Subscriber] = set()
        # slot → (seq, encoded frame); insertion order is seq order because every insert is newest
        self._kept: OrderedDict[Hashable, tuple[int, str]] = OrderedDict()
        self.cleared: Hashable = None  # the slot of a kept `conversation.cleared` frame
        self.open: set[str] | None = None  # ids of messages created and not completed
        self.floor = 0  # the highest seq let go of but by superseding (`Attached.floor`)

    def track(self, type: str, fields: Mapping[str, Any]) -> None:
        """Follow which messages are open (created, not completed yet)."""
        message_id = fields.get("message_id")
        if not isinstance(message_id, str):
            return
        if type == _OPENING:
            self.open = (self.open or set()) | {message_id}
        elif type in _CLOSING and self.open is not None:
            self.open.discard(message_id)
            if not self.open:
                self.open = None

    def trim(self) -> int:
        """Forget the kept frames but a `conversation.cleared` one; returns how much `size`
        changed."""
        cleared = self._kept.get(self.cleared) if self.cleared is not None else None
        dropped = self.clear()
        self.floor = self.seq
        if cleared is not None:
            dropped += self.remember(self.cleared, cleared[0], cleared[1], 1)
        return dropped

    def remember(self, slot: Hashable, seq: int, frame: str, limit: int) -> int:
        """Keep `frame`; returns how much `size` changed."""
        before = self.size
        replaced = self._kept.pop(slot, None)
        if replaced is not None:
            self.size -= len(replaced[1])
        self._kept[slot] = (seq, frame)
        self.size += len(frame)
        while len(self._kept) > limit:
            self.floor, evicted = self._kept.popitem(last=False)[1]
            self.size -= len(evicted)
        return self.size - before

    def clear(self) -> int:
        """Forget every kept frame; returns how much `size` changed."""
        dropped = self.size
        self._kept.clear()
        self.size = 0
        self.cleared = None
        self.floor = 0
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
        replay_idle_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.epoch = uuid.uuid4().hex[:16]  # a restart numbers every conversation anew
        self._replay_events = replay_events
        self._max_idle = max_idle
        self._max_idle_bytes = max_idle_bytes
        self._live: dict[str, _Conversation] = {}
        self._idle: OrderedDict[str, _Conversation] = OrderedDict()
        self._idle_bytes = 0
        self._replay_idle_s = replay_idle_s
        self._clock = clock
        # conversations holding frames, by when they last published (the oldest first)
        self._quiet: OrderedDict[str, tuple[float, _Conversation]] = OrderedDict()

    def footprint(self) -> dict[str, int]:
        """How many conversations are kept, and the characters of their frames (tests, metrics)."""
        return {
            "live": len(self._live),
            "idle": len(self._idle),
            "idle_bytes": self._idle_bytes,
            "kept_bytes": sum(c.size for c in (*self._live.values(), *self._idle.values())),
        }

    async def attach(
        self, conversation: str, subscriber: Subscriber, resume_after: int | None
    ) -> Attached:
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
        # with nothing kept, every frame is let go of
        return Attached(conv.seq, replay, conv.floor if self._replay_events else conv.seq)

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
            slot = replay_slot(type, fields, seq)
            grown += conv.remember(slot, seq, encoded, self._replay_events)
            if type == CLEARING_TYPE:
                conv.cleared = slot
            if self._live.get(conversation) is not conv:  # an answer to a tab that has gone
                self._idle_bytes += grown
                self._trim_idle()
            if self._replay_idle_s is not None:
                conv.track(type, fields)
                self._quiet.pop(conversation, None)
                self._quiet[conversation] = (self._clock(), conv)
                self._trim_quiet(self._replay_idle_s)
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

    def _trim_quiet(self, idle_s: float) -> None:
        """The kept frames of conversations quiet for `idle_s`, no message open, let go of
        (an open one comes back with its next frame)."""
        until = self._clock() - idle_s
        for _ in range(TRIMS_PER_FRAME):
            if not self._quiet:
                return
            identity, (last, conv) = next(iter(self._quiet.items()))
            if last > until:
                return
            del self._quiet[identity]
            if conv.open is None:
                dropped = conv.trim()
                if self._idle.get(identity) is conv:
                    self._idle_bytes += dropped

    def _trim_idle(self) -> None:
        while len(self._idle) > self._max_idle or (
            self._idle and self._idle_bytes > self._max_idle_bytes
        ):
            _, forgotten = self._idle.popitem(last=False)
            self._idle_bytes -= forgotten.size
