"""Pairing codes: a direct message from an unknown sender, on an instance with `dm_policy: pairing`.

The sender gets a short code and the message goes no further (never to the model). An admin
approves the code (`bot pairing approve CODE`, the admin view, or the operators' place); the
approved sender's next message is routed like anyone allowlisted's, and the sender is told, in
their language, by whichever serving process takes the approval first (`PairingNotices`).

What a stranger can make the bot do is bounded: one live code per sender, sent again no more
often than `pairing.resend_s` (other messages meanwhile draw nothing); at most
`pairing.max_pending` live codes per instance (senders past the cap draw nothing and cost no
row); a denied sender draws nothing for `pairing.deny_s`. Each event is claimed before the gate
(the gateway), so a platform's retry never draws a second reply. Codes (bot/pipeline/
pairing_codes.py) are only ever entered by an admin, so guessing one from the chat gets nothing.
With `pairing.place` set, each new code is also posted to the operators' Slack channel with
Approve / Deny buttons (bot/pipeline/pairing_place.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import Final

from adapters.base import Channel, InboundMessage, OutboundContent
from bot.pipeline.pairing_codes import DEFAULTS, PairingSettings, new_code
from bot.pipeline.pairing_place import PairingPlace
from bot.pipeline.routing import Reply
from bot.storage.pairings import PairingRequest
from bot.storage.roles import PairingRecords
from bot.storage.turns import chat_from_record, chat_record
from content.texts import t

log = logging.getLogger(__name__)

NOTICE_EVERY_S: Final = 2.0  # how often a serving process looks for approvals to tell


class PairingGate:
    """The gate a direct message from an unknown sender passes through (the gateway calls it
    after the event is claimed)."""

    def __init__(
        self,
        records: PairingRecords,
        settings: PairingSettings = DEFAULTS,
        *,
        clock: Callable[[], float] = time.time,
        codes: Callable[[], str] = new_code,
        place: PairingPlace | None = None,
    ) -> None:
        """`place`: where operators see each new code with Approve / Deny buttons (None: the
        CLI and the admin view only)."""
        self.records = records
        self.settings = settings
        self.clock = clock
        self.codes = codes
        self.place = place

    def operates(self, message: InboundMessage) -> bool:
        """An operator's press of a pairing button in the place (taken before the access policy)."""
        return self.place is not None and self.place.holds(message)

    async def press(self, message: InboundMessage, reply: Reply) -> None:
        """The press (`operates` was true, its event claimed) decided. Raises `StorageError`."""
        assert self.place is not None
        await self.place.press(message, reply)

    async def admit(self, message: InboundMessage, reply: Reply) -> bool:
        """True when the sender is approved (route the message as allowed); else the sender
        is told their code if one is due, and the message ends here. Raises `StorageError`."""
        s = self.settings
        ticket = await self.records.pairing_request(
            PairingRequest(
                channel=message.chat.channel,
                user_id=message.user_id,
                chat=json.dumps(chat_record(message.chat)),
                user_name=message.user_name,
                language=message.language,
                code=self.codes(),
                now=self.clock(),
                ttl_s=s.ttl_s,
                max_pending=s.max_pending,
                resend_s=s.resend_s,
            )
        )
        if ticket.outcome == "approved":
            return True
        where = f"{message.chat.channel}/{message.user_id}"
        if ticket.outcome == "issued":
            log.info("pairing code issued to %s (%s)", where, message.user_name or "no name")
        elif ticket.outcome == "full":
            log.warning(
                "no pairing code for %s: %d codes are pending on %s already (pairing.max_pending)",
                where,
                s.max_pending,
                message.chat.channel,
            )
        if ticket.send and ticket.code is not None and ticket.expires_at is not None:
            minutes = max(1, math.ceil((ticket.expires_at - self.clock()) / 60))
            await reply(
                message, t(message.language, "pairing.code", code=ticket.code, count=minutes)
            )
        place, code, until = self.place, ticket.code, ticket.expires_at
        if ticket.outcome == "issued" and place and code is not None and until is not None:
            await place.announce(message, code, until)  # after the sender's: it may be slow
        log.debug("pairing gate: %s %s, told: %s", where, ticket.outcome, ticket.send)
        return False


class PairingNotices:
    """Tells approved senders they are in, from a serving process: the approvals no process
    has told yet (whoever approved them: the CLI writes only to the store) are taken every
    NOTICE_EVERY_S, or at once after `wake` (an approval in this process). Each is taken by one
    process; a send that fails is logged, not retried (the sender may write again anyway)."""

    def __init__(
        self,
        records: PairingRecords,
        channels: Mapping[str, Channel],
        *,
        clock: Callable[[], float] = time.time,
        every_s: float = NOTICE_EVERY_S,
    ) -> None:
        self.records = records
        self.channels = channels
        self.clock = clock
        self.every_s = every_s
        self._wake = asyncio.Event()

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        failing = False
        while True:
            try:
                await self.tell_once()
                failing = False
            except Exception:  # the store down, say: the next round tries again
                # once a streak of failures, not every round: the store's own log says more
                log.log(
                    logging.DEBUG if failing else logging.ERROR,
                    "could not look for pairing approvals to tell",
                    exc_info=True,
                )
                failing = True
            try:
                async with asyncio.timeout(self.every_s):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()

    async def tell_once(self) -> int:
        """Tells each approval not yet told on this process's channels; how many were sent."""
        rows = await self.records.pairing_untold(list(self.channels), self.clock())
        sent = 0
        for row in rows:
            chat = chat_from_record(json.loads(row.chat))
            channel = self.channels.get(row.channel)
            if chat is None or channel is None:
                continue
            text = t(row.language, "pairing.approved")
            try:
                await channel.send(chat, OutboundContent(text), final=True)
                sent += 1
            except Exception:
                log.exception("could not tell %s/%s of their approval", row.channel, row.user_id)
        return sent
