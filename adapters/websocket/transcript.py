"""The user's side of the transcript: every accepted message published once, `/new` clearing it.

The bot's frames alone make a transcript without questions: a reload or a second tab would show
answers to nothing. So a message the channel accepts is published to its conversation as
`message.user` (with its `client_message_id` as `message_id`) before the gateway sees it: every
tab shows it, the replay buffer keeps it in order, and the sender learns it was taken. A resend
of an id already published is not published again (the gateway answers it once, and the
transcript must not show it twice); the sending socket alone gets the frame back, without `seq`,
so it can mark the message sent. `/new` publishes `conversation.cleared`, which empties the
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
        self._published: OrderedDict[tuple[str, str], str] = OrderedDict()  # → frame JSON

    async def accepted(
        self, conn: Connection, message: InboundMessage, frame: UserText | ActionFrame
    ) -> None:
        """`message` passed every check and goes to the gateway next."""
        identity = message.chat.chat_id
        if message.command == "new":
            await self._hub.publish(identity, "conversation.cleared", {"reason": "new"})
            return
        cmid = frame.client_message_id if isinstance(frame, UserText) else None
        if cmid is not None:
            again = self._published.get((identity, cmid))
            if again is not None:
                conn.push(again)  # this socket only, no seq: "yes, that one arrived"
                return
        fields = user_fields(message, frame)
        await self._hub.publish(identity, "message.user", fields)
        if cmid is not None:
            self._published[(identity, cmid)] = json.dumps(
                {"type": "message.user", **fields, "duplicate": True}, ensure_ascii=False
            )
            while len(self._published) > self._max_ids:
                self._published.popitem(last=False)


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
