"""The event hub seam: a seq per conversation, replay, fan-out to subscribers, in any process.

A conversation (a web socket identity, a sessions API session) may have several subscribers at
once (tabs, event streams), later on several processes. `EventHub` is the contract the channels
rely on; `MemoryEventHub` (local.py) keeps everything in this process, `RedisEventHub`
(bot/redis/hub.py) shares it between processes. tests/test_event_hub_contract.py checks every
implementation against the contract.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping
from typing import Any, Final, NamedTuple, Protocol

from adapters.base import ChannelError

MAX_IDLE_CONVERSATIONS: Final = 10_000
_SUPERSEDING_TYPES: Final = frozenset({"message.updated", "message.completed"})
# `/new`: the frames before it are another conversation's; a reload must not show them.
CLEARING_TYPE: Final = "conversation.cleared"


class Attached(NamedTuple):
    """What `EventHub.attach` found (see the contract there)."""

    seq: int
    replay: list[str]
    # the highest seq of a frame no longer kept though nothing superseded it (evicted past
    # `replay_events`, let go of when quiet), 0 if none: a replay from below it has lost frames
    floor: int = 0


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
    - **replay**: `attach(c, sub, resume_after)` returns `Attached(seq, replay, floor)`. `seq` is
      the seq of `c` at one instant during the call (0 if nothing was published). `replay` is,
      in seq order, every frame still kept with `resume_after < frame seq <= seq`; empty if
      `resume_after` is None. A `message.updated` is not kept once a later `message.updated` or
      `message.completed` of the same `message_id` exists: both carry the full text. A
      `conversation.cleared` frame drops every frame kept before it (it is kept itself).
      `floor` is the highest seq of a frame let go of otherwise (the oldest past
      `replay_events`; a hub may let a quiet conversation's frames go), 0 since a
      `conversation.cleared` or if none was: `resume_after < floor` means the replay lacks
      frames the client has not seen, a gap below `floor` only superseded updates.
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

    - **epoch**: names the numbering `seq`s belong to. It changes when the hub may have
      forgotten every conversation's seq at once (a memory hub's process restarted), so a client
      that resumes with a seq of another epoch is known to hold a stale number.

    The hub's lifetime (connections, reader tasks) belongs to whoever builds it.
    """

    epoch: str

    async def attach(
        self, conversation: str, subscriber: Subscriber, resume_after: int | None
    ) -> Attached: ...

    async def detach(self, conversation: str, subscriber: Subscriber) -> None: ...

    async def publish(
        self, conversation: str, type: str, fields: Mapping[str, Any], *, retry: bool = True
    ) -> int:
        """`retry=False`: a frame the caller may still refuse (the user's own message); a
        networked hub that cannot reach its store raises `TryLater` at once, keeping nothing,
        instead of waiting the outage out."""
        ...


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
