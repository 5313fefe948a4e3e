"""The operators' place: one parent message per handoff in a Slack channel, the talk in its thread.

Written against the `Channel` protocol (send, edit), so the Slack channel instance the config
names posts and edits as it does for any answer, within its rate budget. The parent says who
asked, from which channel, why, and the summary, links to the admin view, and carries the
buttons for the handoff's state (Take / Release / Resolve); its thread mirrors the
conversation, and operators' replies in it go to the user (relay.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from adapters.base import Channel, ChannelError, ChatRef, MessageHandle, OutboundContent
from bot.handoff.model import clock_text
from bot.runtime.config.handoff import Place
from bot.storage.rows import HandoffRow

HEADLINES = {
    "waiting": "🙋 A user asks for a person",
    "human": "🧑‍💼 With {name}",
    "released": "↩️ Back with the bot (released by {name})",
    "resolved": "✅ Resolved by {name}",
    "withdrawn": "↩️ The user withdrew the request",
    "expired": "⌛ Nobody took it in time: back with the bot",
}
BUTTONS: Mapping[str, Sequence[tuple[str, str, str | None]]] = {
    "waiting": (("Take", "handoff.take", "primary"), ("Resolve", "handoff.resolve", None)),
    "human": (
        ("Release to bot", "handoff.release", None),
        ("Resolve", "handoff.resolve", "danger"),
    ),
}


class OperatorPlace(Protocol):
    """Where operators see handoffs (besides the admin view)."""

    def owns(self, chat: ChatRef) -> bool:
        """Whether a message in `chat` was written in this place (an operator's)."""
        ...

    async def opened(self, row: HandoffRow) -> str:
        """Posts the handoff; the id of its thread."""
        ...

    async def mirror(self, row: HandoffRow, who: str, text: str) -> None: ...

    async def changed(self, row: HandoffRow) -> None: ...


class ChannelPlace:
    """A channel instance's chat (a Slack channel) as the operators' place."""

    def __init__(
        self, place: Place, channels: Mapping[str, Channel], admin_url: str | None = None
    ) -> None:
        self.place = place
        self.channels = channels
        self.admin_url = admin_url

    @property
    def chat(self) -> ChatRef:
        return ChatRef(self.place.instance, self.place.chat_id)

    def owns(self, chat: ChatRef) -> bool:
        return chat.channel == self.place.instance and chat.chat_id == self.place.chat_id

    def _channel(self) -> Channel:
        channel = self.channels.get(self.place.instance)
        if channel is None:
            raise ChannelError(f"the operators' channel {self.place.instance!r} is not running")
        return channel

    async def opened(self, row: HandoffRow) -> str:
        handle = await self._channel().send(self.chat, self._parent(row), final=True)
        return handle.message_id

    async def mirror(self, row: HandoffRow, who: str, text: str) -> None:
        thread = ChatRef(self.place.instance, self.place.chat_id, row.thread)
        await self._channel().send(thread, OutboundContent(f"**{who}:** {text}"), final=True)

    async def changed(self, row: HandoffRow) -> None:
        if not row.thread:
            return
        handle = MessageHandle(self.chat, row.thread)
        await self._channel().edit(handle, self._parent(row), final=True)

    def _parent(self, row: HandoffRow) -> OutboundContent:
        name = row.operator_name or "an operator"
        headline = HEADLINES.get(row.status, row.status).format(name=name)
        fields: list[dict[str, Any]] = [
            {"label": "Channel", "value": row.channel},
            {"label": "User", "value": row.user_name or row.user_id},
            {"label": "Reason", "value": row.reason or "—"},
            {"label": "Asked at", "value": f"{clock_text(row.requested_at)} UTC"},
            {"label": "Summary", "value": row.summary or "—"},
        ]
        if self.admin_url:
            fields.append({"label": "Admin view", "value": f"{self.admin_url}/handoffs/{row.id}"})
        buttons = [
            {"label": label, "action_id": action, "value": row.id, **({"style": s} if s else {})}
            for label, action, s in BUTTONS.get(row.status, ())
        ]
        hint = {"type": "card", "title": headline, "fields": fields, "buttons": buttons}
        text = f"{headline} — {row.reason or 'no reason given'} ({row.user_name or row.user_id})"
        return OutboundContent(text, display=(hint,))
