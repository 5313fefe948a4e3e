"""The user's side of the transcript: every accepted message published once, `/new` clearing it.

The bot's frames alone make a transcript without questions: a reload or a second tab would show
answers to nothing. So a message the channel accepts is published to its conversation as
`message.user` (with its `client_message_id` as `message_id`) before the gateway sees it: every
tab shows it, the replay buffer keeps it in order, and the sender learns it was taken. A resend
of an id already published is not published again (the gateway answers it once, and the
transcript must not show it twice); the sending socket alone gets `message.user` with that id,
`"duplicate": true` and no `seq` or text, so it can mark the message sent. `/new` publishes `conversation.cleared`, which empties the
replay buffer (hub.py) and every open tab.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any, Final

from adapters.base import InboundMessage
from adapters.websocket.connection import Connection
from adapters.websocket.hub import EventHub
from adapters.websocket.protocol import ActionFrame, UserText

# Ids of published messages per process; a resend comes within seconds to minutes of the first.
MAX_REMEMBERED_IDS: Final = 20_000


class UserEcho:
    """Publishes what users say, once per `client_message_id`."""

    def __init__(self, hub: EventHub, *, max_ids: int = MAX_REMEMBERED_IDS) -> None:
        self._hub = hub
        self._max_ids = max_ids
        # (conversation, client_message_id) of published messages; the keys only, so that
        # 20,000 of them stay a few MiB however long their texts were
        self._published: OrderedDict[tuple[str, str], None] = OrderedDict()

    async def accepted(
        self, conn: Connection, message: InboundMessage, frame: UserText | ActionFrame
    ) -> None:
        """`message` passed every check and goes to the gateway next."""
        identity = message.chat.chat_id
        cmid = frame.client_message_id if isinstance(frame, UserText) else None
        if cmid is not None:
            if (identity, cmid) in self._published:
                again = {"type": "message.user", "message_id": cmid, "duplicate": True}
                conn.push(json.dumps(again))  # this socket only, no seq: "yes, that one arrived"
                return
            self._published[(identity, cmid)] = None
            while len(self._published) > self._max_ids:
                self._published.popitem(last=False)
        if message.command == "new":
            await self._hub.publish(identity, "conversation.cleared", {"reason": "new"})
        else:
            await self._hub.publish(identity, "message.user", user_fields(message, frame))


def user_fields(message: InboundMessage, frame: UserText | ActionFrame) -> dict[str, Any]:
    """`message.user`'s fields: the id, the text, and for a button press which button."""
    if isinstance(frame, UserText):
        return {"message_id": message.message_id, "text": frame.text}
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
