"""Slack's limits as `RateBudget` scopes: per-workspace chat.update, per-channel posts.

`chat.update` is Tier 3: about 50 calls a minute per app per workspace, shared by every answer
streaming there, so twenty answers at once get about two edits a minute each. Every update
counts against `Rate("slack:<team>:chat.update", per_minute / 60)`; previews never wait for it
(they are skipped and retried with newer text), finals queue for it, and waiting finals are
served before previews elsewhere take it. `chat.postMessage` allows about one message a second
per channel with short bursts: `Rate("slack:<team>:channel:<id>:post", 1, burst=...)`. Each
message has its own scope (one call in flight), each thread one for its posts, so continuations
go in order. A `ratelimited` answer penalizes the shared scope it exceeded. The scope names carry
the team, so a budget shared by several processes (Redis) can replace the local one unchanged.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from adapters.base import ChatRef
from adapters.budget import Rank, Rate, RateBudget

UPDATE_BURST = 3
POSTS_PER_SECOND = 1.0
POST_BURST = 8
STATUS_PER_MINUTE = 45.0  # assistant.threads.setStatus: Tier 3 as well


class WorkspaceSlots:
    """One Slack app's calls in a `RateBudget`, scoped by workspace (team) and channel."""

    def __init__(self, budget: RateBudget, updates_per_minute: float, app: str = "slack") -> None:
        self._budget = budget
        self._app = app  # the instance's id: Slack's limits are per app, so two apps' differ
        self._per_second = updates_per_minute / 60.0
        self.home_team = "-"  # the token's own workspace (auth.test), for chats without a team

    def update(self, chat: ChatRef, ts: str, rank: Rank) -> AbstractAsyncContextManager[None]:
        """One chat.update of message `ts`; previews raise `Busy` rather than wait."""
        return self._budget.slot(
            f"{self._team(chat)}:message:{chat.chat_id}:{ts}",
            rank,
            interval_s=0.0,
            rates=(self._update_rate(chat),),
        )

    def post(self, chat: ChatRef, rank: Rank) -> AbstractAsyncContextManager[None]:
        """One chat.postMessage into `chat` (its thread keeps its posts in order)."""
        return self._budget.slot(
            f"{self._team(chat)}:thread:{chat.chat_id}:{chat.thread_id or '-'}",
            rank,
            interval_s=0.0,
            rates=(self._post_rate(chat),),
        )

    def status(self, chat: ChatRef, rank: Rank) -> AbstractAsyncContextManager[None]:
        """One assistant.threads.setStatus: a courtesy (a preview) but for the clearing one."""
        team = self._team(chat)
        return self._budget.slot(
            f"{team}:status:{chat.chat_id}:{chat.thread_id or '-'}",
            rank,
            interval_s=0.0,
            rates=(Rate(f"{team}:assistant.threads.setStatus", STATUS_PER_MINUTE / 60, burst=3),),
        )

    async def penalize_updates(self, chat: ChatRef, retry_after: float) -> None:
        await self._budget.penalize(self._update_rate(chat).scope, retry_after)

    async def penalize_posts(self, chat: ChatRef, retry_after: float) -> None:
        await self._budget.penalize(self._post_rate(chat).scope, retry_after)

    def _update_rate(self, chat: ChatRef) -> Rate:
        return Rate(f"{self._team(chat)}:chat.update", self._per_second, burst=UPDATE_BURST)

    def _post_rate(self, chat: ChatRef) -> Rate:
        return Rate(
            f"{self._team(chat)}:channel:{chat.chat_id}:post", POSTS_PER_SECOND, burst=POST_BURST
        )

    def _team(self, chat: ChatRef) -> str:
        return f"{self._app}:{chat.team_id or self.home_team}"
