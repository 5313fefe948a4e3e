"""A background specialist's result becomes the coordinator's next turn in its conversation.

Handed to the workers (`Workers(deliver=...)`) and to the recovery at start (a specialist the
last shutdown interrupted). Where to answer comes from the store (the conversation's last
turn), not from this process's memory, so the result lands whichever process saw the chat.
"""

from __future__ import annotations

import logging

from adapters.base import InboundMessage
from agent.workers import BackgroundResult
from bot.pipeline.conversations import ConversationQueue
from bot.pipeline.dedup import Dedup
from bot.pipeline.turn_input import TASK_EVENT
from bot.storage.roles import TurnRecords

log = logging.getLogger(__name__)


class BackgroundResults:
    def __init__(
        self, turn_log: TurnRecords, dedup: Dedup, conversations: ConversationQueue
    ) -> None:
        """`turn_log`: where each conversation was answered last."""
        self.turn_log = turn_log
        self.dedup = dedup
        self.conversations = conversations

    async def deliver(self, result: BackgroundResult) -> None:
        """Queue `result` as a message to the coordinator, once however often it is handed in
        (its event is claimed); the gateway merges results that arrive together."""
        event_id = f"{TASK_EVENT}{result.task_id}"
        chat = await self.turn_log.conversation_chat(result.conversation_key)
        if chat is None or not await self.dedup.claim(event_id):
            log.warning("background result %s not delivered (conversation gone)", result.task_id)
            return
        text = (
            f'<task-notification task_id="{result.task_id}" subagent_type="{result.subagent_type}" '
            f'status="{result.status}">\n'
            f"The specialist you dispatched in the background ({result.description}) finished. "
            f"Its result:\n{result.result_text()}\n</task-notification>\n"
            "This comes from the system, not the user: tell the user what it found, in your own words."
        )
        # its media ride with it (through the Redis queue too): the answer carries them
        message = InboundMessage(
            chat, result.user_id, text, event_id, None, mentioned=True, parts=result.parts
        )
        await self.conversations.enqueue(message)
