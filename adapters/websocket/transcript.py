"""The user's side of the transcript: every accepted message published once, `/new` clearing it.

The bot's frames alone make a transcript without questions: a reload or a second tab would show
answers to nothing. So a message the channel accepts is published to its conversation as
`message.user` (with its `client_message_id` as `message_id`) before the gateway sees it: every
tab shows it, the replay buffer keeps it in order, and the sender learns it was taken. A resend
of an id already published is not published again (the gateway answers it once, and the
transcript must not show it twice); the sending socket alone gets `message.user` with that id,
`"duplicate": true` and no `seq` or text, so it can mark the message sent. `/new` publishes `conversation.cleared`, which empties the
replay buffer (adapters/hub/) and every open tab. A resend is recognised after a restart (or in
another process) too: where the gateway's own claims are the store's (embedded), by making the
gateway's claim for it (`gateway_claims`: the gateway's claim then writes nothing, where a read
or a claim of the echo's own was one more statement a turn); else by a durable claim of its own
(`claims`, the app's store, as `echo:<event id>`: the gateway's claims are then Redis's).

The replay buffer is memory: a restart, an evicted idle conversation or one longer than the
buffer would show a cut transcript while the bot remembers it all. So when the buffer cannot
serve a hello's `resume_after` (0: the whole transcript; or frames after it are gone), the
stored transcript (`ConversationHistory`) is sent first, as `message.user` and
`message.completed` frames marked `"history": true` without `seq`, minus the messages the replay
itself carries; then the replay, then live frames.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Final

from adapters.base import ChatRef, InboundMessage, TryLater
from adapters.history import Claims, ConversationHistory
from adapters.hub import Attached, EventHub
from adapters.hub.base import CLEARING_TYPE
from adapters.websocket.connection import Connection
from adapters.websocket.protocol import ActionFrame, Stop, UserText, now_stamp
from content.parts import Part

Render = Callable[[Sequence[Part]], list[dict[str, Any]]]  # parts as frames carry them

log = logging.getLogger(__name__)

# Ids of published messages per process; a resend comes within seconds to minutes of the first.
MAX_REMEMBERED_IDS: Final = 20_000


class UserEcho:
    """Publishes what users say, once per `client_message_id`."""

    def __init__(
        self,
        hub: EventHub,
        *,
        claims: Claims | None = None,
        gateway_claims: Claims | None = None,
        max_ids: int = MAX_REMEMBERED_IDS,
        render: Render | None = None,
    ) -> None:
        self._hub = hub
        self._render = render
        self._claims = claims
        self._gateway_claims = gateway_claims  # claimed for the gateway (module doc)
        self._max_ids = max_ids
        # (conversation, client_message_id) of published messages; the keys only, so that
        # 20,000 of them stay a few MiB however long their texts were
        self._published: OrderedDict[tuple[str, str], None] = OrderedDict()

    async def accepted(
        self, conn: Connection, message: InboundMessage, frame: UserText | ActionFrame
    ) -> None:
        """`message` passed every check and goes to the gateway next."""
        identity = message.chat.chat_id
        cmid = frame.client_message_id
        if cmid is not None:
            # known before the await: a second copy sent meanwhile (another tab) is a duplicate
            first = (identity, cmid) not in self._published
            self._published[(identity, cmid)] = None
            while len(self._published) > self._max_ids:
                self._published.popitem(last=False)
            if not first or not await self._claim(message):
                again = {"type": "message.user", "message_id": cmid, "duplicate": True}
                conn.push(json.dumps(again))  # this socket only, no seq: "yes, that one arrived"
                return
        try:
            if message.command == "new":
                await self._hub.publish(
                    identity, "conversation.cleared", {"reason": "new"}, retry=False
                )
            else:
                fields = user_fields(message, frame) | {"at": now_stamp()}
                if message.parts and self._render is not None:
                    fields["attachments"] = self._render(message.parts)
                await self._hub.publish(identity, "message.user", fields, retry=False)
        except TryLater:  # nothing kept: the resend the client is told to send is a first
            if cmid is not None:
                self._published.pop((identity, cmid), None)
                await self._unclaim(message, gateway_saw_it=False)
            raise

    async def refused(
        self,
        conn: Connection,
        message: InboundMessage,
        frame: UserText | Stop | ActionFrame,
        why: str,
    ) -> None:
        """The gateway did not take `message` (its conversation's queue is full): the sender
        gets `queue_full`, every tab and the replay its `message.dropped` (the echo went out
        before the gateway refused it), and its id is free again, so a resend is a first."""
        conn.send_error(
            "queue_full",
            f"{why} — send it again once the bot has answered (the same client_message_id is fine)",
            message_id=message.message_id or "",
        )
        if isinstance(frame, Stop):
            return
        cmid = frame.client_message_id
        if cmid is not None:
            self._published.pop((message.chat.chat_id, cmid), None)
            await self._unclaim(message, gateway_saw_it=True)
        fields = {"message_id": message.message_id, "reason": "queue_full"}
        try:
            await self._hub.publish(message.chat.chat_id, "message.dropped", fields)
        except Exception as exc:  # the sender was told; other tabs show it as unanswered
            log.warning("websocket %s: refusal not published: %s", message.chat.chat_id, exc)

    async def _unclaim(self, message: InboundMessage, *, gateway_saw_it: bool) -> None:
        if self._gateway_claims is not None:
            if gateway_saw_it:
                return  # the gateway let go of its claim as it refused the message
            claims, event_id = self._gateway_claims, message.event_id
        elif self._claims is not None:
            claims, event_id = self._claims, "echo:" + message.event_id
        else:
            return
        try:
            await claims.release(event_id)
        except Exception as exc:  # its resend then shows as a duplicate, and is still answered
            log.warning("websocket %s: resend claim not released: %s", message.chat.chat_id, exc)

    async def _claim(self, message: InboundMessage) -> bool:
        """False when another process (or this one before a restart) published this id."""
        try:
            if self._gateway_claims is not None:
                return await self._gateway_claims.claim(message.event_id)
            if self._claims is None:
                return True
            return await self._claims.claim("echo:" + message.event_id)
        except Exception as exc:  # the storage failed: publishing twice beats losing it
            log.warning("websocket %s: resend check failed: %s", message.chat.chat_id, exc)
            return True


_HISTORY_TYPES: Final = {"user": "message.user", "assistant": "message.completed"}


def falls_short(resume_after: int | None, attached: Attached) -> bool:
    """Whether the replay buffer may lack frames the client asked for, so the stored transcript
    is needed: the whole transcript (0) unless the buffer holds all of it since a `/new`, a hub
    that forgot (a restart: its seq below `resume_after`), or frames after `resume_after` let go
    of (its floor above it). A gap of superseded updates alone is no reason: the frame that
    superseded them carries their text."""
    if resume_after is None:
        return False
    replay = attached.replay
    first = json.loads(replay[0]) if replay else {}
    if first.get("type") == CLEARING_TYPE and attached.floor < first.get("seq", 0):
        return False  # the buffer holds everything since `/new`
    if resume_after == 0 or attached.seq < resume_after:
        return True
    return resume_after < attached.floor


async def stored_frames(
    history: ConversationHistory,
    chat: ChatRef,
    user_id: str,
    replay: list[str],
    render: Render | None = None,
) -> list[str]:
    """The stored messages the replay does not carry, as frames marked `history` (no seq);
    their files as `attachments` with fresh links when `render` is given."""
    try:
        stored = await history.recent(chat, user_id)
    except Exception as exc:  # the live transcript still works: say so in the log only
        log.warning("websocket %s: stored transcript not read: %s", chat.chat_id, exc)
        return []
    if not stored:
        return []
    replayed = {json.loads(frame).get("message_id") for frame in replay}
    frames = []
    for message in stored:
        if message.message_id in replayed:
            continue
        frame: dict[str, Any] = {
            "type": _HISTORY_TYPES[message.role],
            "message_id": message.message_id,
            "text": message.text,
            "history": True,
        }
        if message.role == "assistant":
            frame["display"] = []
        if message.parts and render is not None:
            frame["attachments"] = render(message.parts)
        frames.append(json.dumps(frame, ensure_ascii=False, separators=(",", ":")))
    return frames


def as_history(encoded: str) -> str:
    """A kept frame for a client whose seqs are of another epoch: without its `seq` (which the
    client would compare with its stale one), marked `history`."""
    frame = json.loads(encoded)
    frame.pop("seq", None)
    frame["history"] = True
    return json.dumps(frame, ensure_ascii=False, separators=(",", ":"))


def user_fields(message: InboundMessage, frame: UserText | ActionFrame) -> dict[str, Any]:
    """`message.user`'s fields: the id, the text, for a command its name (clients show it as a
    line of the conversation, not as something said to the bot), for a button press which one."""
    if isinstance(frame, UserText):
        fields: dict[str, Any] = {"message_id": message.message_id, "text": frame.text}
        if message.command:
            fields["command"] = message.command
        return fields
    shown = frame.label or frame.value or frame.action_id
    return {
        "message_id": message.message_id,
        "text": shown,
        "action": {
            "action_id": frame.action_id,
            "label": frame.label,
            "value": frame.value,
            "message_id": frame.message_id,
        },
    }
