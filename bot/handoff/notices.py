"""What the user sees of a handoff: notices in their own chat, and state events for clients.

A notice (a person joined, the bot is back, an operator's reply) is a final message of its own
through the user's channel. Channels that carry events (the web socket, the sessions API:
`EventSink`) also get `handoff.updated` with the mode and the operator's name, which the widget
shows as "a person is replying".
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

from adapters.base import Channel, ChannelError, ChatRef, EventSink, OutboundContent
from bot.handoff.feed import HandoffFeed
from bot.storage.rows import HandoffRow
from bot.storage.turns import chat_from_record

log = logging.getLogger(__name__)

EVENT = "handoff.updated"


def mode_of(row: HandoffRow) -> str:
    return row.status if row.status in ("waiting", "human") else "bot"


class Notices:
    def __init__(self, channels: Mapping[str, Channel], feed: HandoffFeed) -> None:
        self.channels = channels
        self.feed = feed

    async def tell(self, row: HandoffRow, text: str) -> None:
        """`text` to the user, in the chat the handoff came from. A channel that refuses is
        an error for the operator (ChannelError), not a silent loss."""
        chat = chat_from_record(json.loads(row.chat))
        channel = self.channels.get(row.channel)
        if chat is None or channel is None:
            raise ChannelError(f"the channel {row.channel!r} of this conversation is not running")
        await channel.send(chat, OutboundContent(text), final=True)

    async def inform(self, row: HandoffRow, text: str) -> None:
        """A notice after a change that has happened: one the channel refuses is logged (the
        change stands; the user sees it on their next message)."""
        try:
            await self.tell(row, text)
        except ChannelError as exc:
            log.error("handoff %s: a notice did not reach the user: %s", row.id, exc)

    async def state(self, row: HandoffRow, chat: ChatRef) -> None:
        fields = {
            "handoff_id": row.id,
            "mode": mode_of(row),
            "status": row.status,
            "operator": row.operator_name if mode_of(row) == "human" else None,
        }
        await self.feed.publish(row.id, {"kind": "state", **fields})
        channel = self.channels.get(chat.channel)
        if not isinstance(channel, EventSink):
            return
        try:
            await channel.emit_event(chat, EVENT, fields)
        except ChannelError as exc:
            log.warning("handoff %s: %s not emitted in %s: %s", row.id, EVENT, chat.key, exc)
