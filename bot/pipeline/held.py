"""Messages in a conversation a person holds, or is asked to: recorded, acknowledged, no model.

The default `ModeHandler` of the `waiting` and `human` modes. The message goes into the
conversation's history as the user's (so the transcript shows it, and the model reads it once
the bot has the conversation back); `waiting` tells the user a person will answer, `human`
says nothing (the person answers). What operators see of it is the handoff's to add.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Final, Protocol

from adapters.base import InboundMessage
from agent.types import Message
from bot.pipeline.routing import Reply
from bot.pipeline.turn_input import combine
from content.texts import DEFAULT_LANGUAGE, has, t
from tools.pii import PiiMasker

log = logging.getLogger(__name__)

WAITING: Final = t(DEFAULT_LANGUAGE, "gateway.waiting")  # in English (tests)
# per mode: a text key (said in the conversation's language), a text of its own, or None
NOTICES: Final[Mapping[str, str | None]] = {"waiting": "gateway.waiting", "human": None}
HELD_TURN: Final = "held:"  # the turn id of a held message's history entry: held:<event id>

SessionFor = Callable[[InboundMessage], Awaitable[str]]


class MessageLog(Protocol):
    async def append_messages(
        self, session_id: str, turn_id: str, messages: Sequence[Message]
    ) -> None: ...


class HeldMessages:
    def __init__(
        self,
        *,
        history: MessageLog,
        session_for: SessionFor,
        masker: Callable[[], PiiMasker | None] = lambda: None,
        notices: Mapping[str, str | None] = NOTICES,
    ) -> None:
        """`session_for(message)`: the conversation's active session, as its turns find it;
        `masker()`: personal data masked in the history as a turn masks it."""
        self.history = history
        self.session_for = session_for
        self.masker = masker
        self.notices = notices

    async def take(self, message: InboundMessage, mode: str, reply: Reply) -> None:
        session_id = await self.session_for(message)
        text = combine([message], self.masker())
        entry = Message("user", text, parts=message.parts)
        await self.history.append_messages(session_id, HELD_TURN + message.event_id, [entry])
        log.info("message %s held (%s mode)", message.event_id, mode)
        notice = self.notices.get(mode)
        if notice:
            await reply(message, t(message.language, notice) if has(notice) else notice)
