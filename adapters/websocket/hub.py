"""Conversations of the web socket channel: a seq per conversation, a replay buffer, fan-out.

A conversation (one identity) may have several sockets open at once (tabs). Every frame published
to it gets the next `seq`, is remembered for replay and is pushed to every open socket.

The replay buffer drops a `message.updated` as soon as a later update or the completion of the
same message arrives: both carry the full text, so the newer frame makes the older one useless.
That keeps a long streamed answer from pushing its own `message.created` out of the buffer.
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
_SUPERSEDING_TYPES: Final = frozenset({"message.updated", "message.completed"})


class Subscriber(Protocol):
    def push(self, frame: str) -> bool:
        """Queue one encoded frame; False when the socket is gone and should be dropped."""
        ...


class Conversation:
    __slots__ = ("_kept", "identity", "seq", "sockets")

    def __init__(self, identity: str) -> None:
        self.identity = identity
        self.seq = 0
        self.sockets: set[Subscriber] = set()
        # slot → (seq, encoded frame); insertion order is seq order because every insert is newest
        self._kept: OrderedDict[Hashable, tuple[int, str]] = OrderedDict()

    def remember(self, slot: Hashable, seq: int, frame: str, limit: int) -> None:
        self._kept.pop(slot, None)
        self._kept[slot] = (seq, frame)
        while len(self._kept) > limit:
            self._kept.popitem(last=False)

    def frames_after(self, seq: int) -> list[str]:
        return [frame for kept_seq, frame in self._kept.values() if kept_seq > seq]


class ConversationHub:
    """Conversations with open sockets are never evicted; idle ones live in a bounded LRU."""

    def __init__(self, *, replay_events: int, max_idle: int = MAX_IDLE_CONVERSATIONS) -> None:
        self._replay_events = replay_events
        self._max_idle = max_idle
        self._live: dict[str, Conversation] = {}
        self._idle: OrderedDict[str, Conversation] = OrderedDict()

    def attach(
        self, identity: str, socket: Subscriber, resume_after: int | None
    ) -> tuple[int, list[str]]:
        """Join `socket` to its conversation: its current seq and the frames to replay to it.

        The caller must queue `ready` and the replay before it next awaits, so that no frame
        published in between is missed or sent twice.
        """
        conv = self._live.get(identity)
        if conv is None:
            conv = self._idle.pop(identity, None) or Conversation(identity)
            self._live[identity] = conv
        conv.sockets.add(socket)
        replay = conv.frames_after(resume_after) if resume_after is not None else []
        return conv.seq, replay

    def detach(self, identity: str, socket: Subscriber) -> None:
        conv = self._live.get(identity)
        if conv is not None:
            conv.sockets.discard(socket)
            self._retire_if_idle(conv)

    def publish(self, identity: str, type: str, fields: Mapping[str, Any]) -> int:
        """Send one frame to every socket of the conversation; returns its seq."""
        conv = self._conversation(identity)
        seq = conv.seq + 1
        frame: dict[str, Any] = {"type": type, **fields}
        frame["type"] = type
        frame["seq"] = seq
        try:
            encoded = json.dumps(frame, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise ChannelError(
                f"{type} frame for {identity!r} is not JSON-serializable ({exc}); "
                "pass only str, int, float, bool, None, lists and dicts"
            ) from exc
        conv.seq = seq
        if self._replay_events:
            slot: Hashable = seq
            if type in _SUPERSEDING_TYPES and isinstance(fields.get("message_id"), str):
                slot = ("state", fields["message_id"])
            conv.remember(slot, seq, encoded, self._replay_events)
        dead = [socket for socket in conv.sockets if not socket.push(encoded)]
        if dead:
            log.debug("dropping %d closed socket(s) from %s", len(dead), identity)
            conv.sockets.difference_update(dead)
            self._retire_if_idle(conv)
        return seq

    def _conversation(self, identity: str) -> Conversation:
        conv = self._live.get(identity)
        if conv is not None:
            return conv
        conv = self._idle.get(identity)
        if conv is not None:
            self._idle.move_to_end(identity)
            return conv
        conv = Conversation(identity)
        self._add_idle(conv)
        return conv

    def _retire_if_idle(self, conv: Conversation) -> None:
        if not conv.sockets and self._live.get(conv.identity) is conv:
            del self._live[conv.identity]
            self._add_idle(conv)

    def _add_idle(self, conv: Conversation) -> None:
        self._idle[conv.identity] = conv
        if len(self._idle) > self._max_idle:
            self._idle.popitem(last=False)
