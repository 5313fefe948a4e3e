"""The stored transcript a channel shows after a reload: the active session's turns, read back.

A turn row keeps the user's messages as their chat showed them (with the client's ids and the
media they carried) and, once completed, the final answer with the id of the message it filled.
Unfinished, stopped and failed turns contribute their user messages only: never a half-streamed
preview. `/new` closes the session, so nothing from before it comes back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from adapters.base import ChatRef
from adapters.history import StoredMessage
from bot.storage.ids import short_turn_id
from bot.storage.roles import TurnRecords
from content.parts import parts_from_json

TRANSCRIPT_MESSAGES: Final = 100  # the newest messages a client is sent from the store


class StoreHistory:
    """`ConversationHistory` on the store; `agent_id` names the persona whose sessions these are."""

    def __init__(
        self, store: TurnRecords, agent_id: Callable[[], str], *, limit: int = TRANSCRIPT_MESSAGES
    ) -> None:
        self.store = store
        self.agent_id = agent_id
        self.limit = limit

    async def recent(self, chat: ChatRef, user_id: str) -> list[StoredMessage]:
        # every turn has at least one message, so `limit` turns hold at least `limit` messages
        turns = await self.store.recent_turns(
            channel=chat.channel,
            conversation_key=chat.key,
            user_id=user_id,
            agent_id=self.agent_id(),
            limit=self.limit,
        )
        messages: list[StoredMessage] = []
        for turn in turns:
            for shown in turn.inbound_messages:
                parts = parts_from_json(
                    shown.get("parts")
                )  # JSON text (bot/pipeline/turn_input.py)
                messages.append(StoredMessage("user", shown["message_id"], shown["text"], parts))
            if turn.status == "completed" and turn.final_text is not None:
                placeholder = turn.placeholder
                # no placeholder: its send went unconfirmed and the answer came as a new message
                # (a record without `message_id`: the placeholder's id was never learned)
                shown_id = placeholder.get("message_id") if placeholder else None
                answer_id = shown_id if shown_id is not None else f"t_{short_turn_id(turn.id)}"
                # with the media it went out with (links are signed afresh when shown)
                answer = StoredMessage("assistant", answer_id, turn.final_text, turn.final_parts)
                messages.append(answer)
        return messages[-self.limit :]
