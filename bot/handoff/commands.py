"""The user's commands for a handoff: `/human` asks for a person, `/stop` withdraws the request.

`/stop` replaces the gateway's own (bot/pipeline/commands.py) in the command table: in a
conversation a person is asked for or holds, it hands the conversation back to the bot; in any
other it stops the running answer, as before.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from adapters.base import InboundMessage
from bot.handoff.desk import HandoffDesk
from bot.handoff.model import ASKED_SETTING, Asked
from bot.handoff.relay import SWITCH
from bot.pipeline.commands import StopCommand
from bot.pipeline.routing import Reply
from content.texts import t

ASKED_BY_USER = "the user asked for a person"


@dataclass(frozen=True, slots=True)
class HumanCommand:
    """Kept in the conversation's state and switched to in the conversation's queue, after the
    turn running now (on whichever process): its final goes out before the notice."""

    desk: HandoffDesk
    queue: Callable[[InboundMessage], Awaitable[None]]  # the conversations' `enqueue`
    name: str = "human"
    help: str = "handoff.human_help"

    async def run(self, message: InboundMessage, reply: Reply) -> None:
        refusal = self.desk.unavailable(message.language)
        if refusal is not None:  # no operator place, or outside its hours: the bot stays
            await reply(message, refusal)
            return
        said = message.text.strip().partition(" ")[2].strip()  # `/human my card is blocked`
        asked = Asked(said or ASKED_BY_USER, said, message.user_id, message.user_name, "/human")
        await self.desk.states.update(
            message.conversation_key, lambda s: s.with_setting(ASKED_SETTING, asked.dumps())
        )
        switch = f"{SWITCH}{uuid.uuid4().hex}"  # no user: never coalesced into a user's turn
        await self.queue(InboundMessage(message.chat, "", "", switch, language=message.language))


@dataclass(frozen=True, slots=True)
class HandoffStopCommand:
    desk: HandoffDesk
    stop: StopCommand
    name: str = "stop"
    help: str = "command.stop_help"

    async def run(self, message: InboundMessage, reply: Reply) -> None:
        if await self.desk.withdraw(message.conversation_key, message.user_id):
            await reply(message, t(message.language, "handoff.withdrawn"))
            return
        await self.stop.run(message, reply)
