"""Telegram's limits as `RateBudget` scopes: one slot per chat, under a bot-wide rate.

Telegram allows about one message or edit per second per chat (one per three seconds in groups)
and about thirty per second per bot; past that it answers 429 and bans the chat for a while.
So every send, edit and chat action to a chat takes the chat's slot (the budget spaces them by
the chat's interval and ranks finals > sends > previews, "typing" being a preview), and counts
against the bot-wide rate. A 429 pauses the chat. Scopes carry the bot's id, so several bots can
share one budget (and, later, one Redis).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from adapters.budget import Rank, Rate, RateBudget

BOT_PER_SECOND = 30.0  # Telegram's Bot FAQ: about 30 messages a second per bot
BOT_BURST = 30


class ChatSlots:
    """One bot's chats in a `RateBudget`: their scope names, intervals and the bot-wide rate."""

    def __init__(
        self, budget: RateBudget, bot_id: int, interval_for: Callable[[str], float]
    ) -> None:
        self._budget = budget
        self._prefix = f"telegram:{bot_id}"
        self._rates = (Rate(self._prefix, BOT_PER_SECOND, burst=BOT_BURST),)
        self._interval_for = interval_for  # chat id -> seconds between calls to it

    def slot(self, chat_id: str, rank: Rank) -> AbstractAsyncContextManager[None]:
        """The chat's slot for one call; `Busy` at once for previews and "typing"."""
        return self._budget.slot(
            self._scope(chat_id),
            rank,
            interval_s=self._interval_for(chat_id),
            rates=self._rates,
        )

    async def penalize(self, chat_id: str, retry_after: float) -> None:
        await self._budget.penalize(self._scope(chat_id), retry_after)

    def _scope(self, chat_id: str) -> str:
        return f"{self._prefix}:chat:{chat_id}"
