"""The operators' place for pairing requests (`pairing.place`, a Slack channel): each new code is
posted there with Approve / Deny buttons, and a press decides it.

`pairing.place` is `slack:<instance>/<channel id>`, the shape of `handoff.place`. A press is
taken before the access policy (the place is the operators' own; who may press is the channel's
membership, narrowed by `pairing.approvers` when set), claimed once like any event, and answered
in the request's thread: who decided, or that the code is no longer pending (a second press,
another operator's, a replay: a code is decided once).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime
from typing import Final

from adapters.base import Channel, ChatRef, InboundMessage, OutboundContent
from bot.pipeline.pairing_codes import PairingSettings, decide
from bot.pipeline.places import Place
from bot.pipeline.routing import Reply
from bot.storage.roles import PairingRecords
from content.texts import t

log = logging.getLogger(__name__)

APPROVE: Final = "pairing.approve"  # the buttons' action ids
DENY: Final = "pairing.deny"


class PairingPlace:
    def __init__(
        self,
        place: Place,
        channels: Mapping[str, Channel],
        records: PairingRecords,
        settings: PairingSettings,
        *,
        approvers: Collection[str] = (),
        language: str | None = None,
        decided: Callable[[], None] = lambda: None,
    ) -> None:
        """`language`: the operators' (`gateway.language`); `decided`: an approval to tell."""
        self.place = place
        self.channels = channels
        self.records = records
        self.settings = settings
        self.approvers = frozenset(approvers)
        self.language = language
        self.decided = decided

    def holds(self, message: InboundMessage) -> bool:
        """A press of one of our buttons, in the place."""
        return (
            message.action is not None
            and message.action.action_id in (APPROVE, DENY)
            and message.chat.channel == self.place.instance
            and message.chat.chat_id == self.place.chat_id
        )

    async def announce(self, message: InboundMessage, code: str, expires_at: float) -> None:
        """The new code, who asked and where, with the two buttons; a failure is logged only
        (the code still works from the CLI and the admin view)."""
        lang = self.language
        until = datetime.fromtimestamp(expires_at, UTC).strftime("%Y-%m-%d %H:%M")
        text = t(
            lang,
            "pairing.place_request",
            channel=message.chat.channel,
            name=message.user_name or message.user_id,
            user=message.user_id,
            code=code,
            until=until,
        )
        approve = {"label": t(lang, "pairing.approve"), "action_id": APPROVE, "style": "primary"}
        deny = {"label": t(lang, "pairing.deny"), "action_id": DENY, "style": "danger"}
        hint = {"type": "buttons", "buttons": [approve | {"value": code}, deny | {"value": code}]}
        chat = ChatRef(self.place.instance, self.place.chat_id)
        try:
            await self.channels[chat.channel].send(chat, OutboundContent(text, (hint,)), final=True)
        except Exception:
            log.exception("could not post pairing code of %s to %s", message.user_id, self.place)

    async def press(self, message: InboundMessage, reply: Reply) -> None:
        """An operator's press (its event claimed): the code decided, the thread told."""
        assert message.action is not None  # `holds` said so
        lang, who = self.language, message.user_name or message.user_id
        if self.approvers and message.user_id not in self.approvers:
            await reply(message, t(lang, "pairing.place_not_yours"))
            return
        approve = message.action.action_id == APPROVE
        row = await decide(
            self.records,
            message.action.value or "",
            approve=approve,
            by=f"{message.chat.channel}:{message.user_id}",
            settings=self.settings,
        )
        if row is None:
            await reply(message, t(lang, "pairing.place_gone"))
            return
        if approve:
            self.decided()
        key = "pairing.place_approved" if approve else "pairing.place_denied"
        await reply(message, t(lang, key, who=who, name=row.user_name or row.user_id))
