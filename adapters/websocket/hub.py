"""The event hub of the web socket channel: a seq per conversation, replay, fan-out to sockets.

A conversation (one identity) may have several sockets open at once (tabs), later on several
processes. `EventHub` is the contract the channel relies on; `MemoryEventHub` keeps everything in
this process. tests/test_event_hub_contract.py checks every implementation against the contract.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from typing import Any, Final, Protocol

from adapters.base import ChannelError

log = logging.getLogger(__name__)

MAX_IDLE_CONVERSATIONS: Final = 10_000
# Kept frames of idle conversations in all: 10,000 of them with 200 long answers each would
# otherwise be gigabytes.
MAX_IDLE_BYTES: Final = 64 * 2**20
_SUPERSEDING_TYPES: Final = frozenset({"message.updated", "message.completed"})
# `/new`: the frames before it are another conversation's; a reload must not show them.
CLEARING_TYPE: Final = "conversation.cleared"


class Subscriber(Protocol):
    def push(self, frame: str) -> bool:
        """Queue one encoded frame without blocking; False when gone and to be dropped."""
        ...


class EventHub(Protocol):
    """Numbers, keeps and fans out the frames of conversations.

    The contract, for a conversation `c` (every implementation passes the contract test):

    - **seq**: `publish` encodes `{"type", **fields, "seq"}` as one JSON text and returns its seq:
      1 for the first frame of `c`, then strictly increasing by 1, whichever process publishes.
      A frame that is not JSON-serialisable raises `ChannelError`, consumes no seq and reaches
      no subscriber.
    - **replay**: `attach(c, sub, resume_after)` returns `(seq, replay)`. `seq` is the seq of `c`
      at one instant during the call (0 if nothing was published). `replay` is, in seq order,
      every frame still kept with `resume_after < frame seq <= seq`; empty if `resume_after` is
      None. A `message.updated` is not kept once a later `message.updated` or
      `message.completed` of the same `message_id` exists: both carry the full text. A
      `conversation.cleared` frame drops every frame kept before it (it is kept itself).
    - **live delivery**: after `attach` returns, `sub.push` is called with every frame of `c` whose
      seq is greater than the returned `seq`, exactly once each, in seq order, and is never
      called before `attach` returns. So a caller that pushes `ready` and the replay before its
      next await gives the client a gapless stream without duplicates. Frames published
      anywhere (other processes too) reach `sub` through the hub. (A networked hub can subscribe
      first, then read the seq and the kept frames in one step, and skip live frames up to it.)
    - **detach**: once `detach(c, sub)` returns, `sub` gets nothing more; detaching a subscriber
      that is not attached does nothing. A `push` that returns False detaches `sub` as well.
    - **memory**: a conversation with a subscriber is kept; idle ones may be forgotten (bounded),
      and a forgotten conversation starts again at seq 0 (the widget starts over when `ready`'s
      seq is below its own).

    The hub's lifetime (connections, reader tasks) belongs to whoever builds it.
    """

    async def attach(
        self, conversation: str, subscriber: Subscriber, resume_after: int | None
    ) -> tuple[int, list[str]]: ...

    async def detach(self, conversation: str, subscriber: Subscriber) -> None: ...

    async def publish(self, conversation: str, type: str, fields: Mapping[str, Any]) -> int: ...


# one encoder for every frame: `json.dumps` with options builds a new one per call
_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def encode_frame(conversation: str, type: str, fields: Mapping[str, Any], seq: int) -> str:
    """The frame's JSON text, or `ChannelError` naming what cannot be encoded."""
    frame: dict[str, Any] = {"type": type, **fields}
    frame["type"] = type
    frame["seq"] = seq
    try:
        return _ENCODER.encode(frame)
    except (TypeError, ValueError) as exc:
        raise ChannelError(
            f"{type} frame for {conversation!r} is not JSON-serializable ({exc}); "
            "pass only str, int, float, bool, None, lists and dicts"
        ) from exc


def replay_slot(type: str, fields: Mapping[str, Any], seq: int) -> Hashable:
    """Frames with equal slots supersede each other in the replay buffer.

    Without this a long streamed answer would push its own `message.created` out of the buffer.
    """
    message_id = fields.get("message_id")
    if type in _SUPERSEDING_TYPES and isinstance(message_id, str):
        return ("state", message_id)
    return seq


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

    async def publish(self, conversation: str, type: str, fields: Mapping[str, Any]) -> int:
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
