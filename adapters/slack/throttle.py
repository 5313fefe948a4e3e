"""Slack's limits as `RateBudget` scopes: per-workspace methods, per-channel posts.

`chat.update` is Tier 3: about 50 calls a minute per app per workspace, shared by every answer
streaming there, so twenty answers at once get about two edits a minute each. Every update
counts against `Rate("slack:<team>:chat.update", per_minute / 60)`; previews never wait for it
(they are skipped and retried with newer text), finals queue for it, and waiting finals are
served before previews elsewhere take it. `chat.postMessage` allows about one message a second
per channel with short bursts: `Rate("slack:<team>:channel:<id>:post", 1, burst=...)`. Each
message has its own scope (one call in flight), each thread one for its posts, so continuations
go in order. A `ratelimited` answer penalizes the shared scope it exceeded. The scope names carry
the team, so a budget shared by several processes (Redis) can replace the local one unchanged.

Native streams have budgets of their own, apart from chat.update's: `chat.appendStream` is Tier 4
(100+ a minute per workspace), `chat.startStream` and `chat.stopStream` Tier 2 (20+ a minute
each). A start never waits (`preview`): with none free the answer is posted and updated as
before. A stop is a final and queues; since every stop ends a stream a start opened, stops come
no faster than starts did. Appends are previews: skipped and retried with newer text.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from adapters.base import ChatRef
from adapters.budget import Rank, Rate, RateBudget

UPDATE_BURST = 3
POSTS_PER_SECOND = 1.0
POST_BURST = 8
STATUS_PER_MINUTE = 45.0  # assistant.threads.setStatus: Tier 3 as well (agent sessions: taken so)


@dataclass(frozen=True, slots=True)
class StreamRates:
    """Our pace for the stream methods, a little under Slack's tiers."""

    appends_per_minute: float = 90.0  # chat.appendStream: Tier 4, 100+
    starts_per_minute: float = 18.0  # chat.startStream: Tier 2, 20+
    stops_per_minute: float = 18.0  # chat.stopStream: Tier 2, 20+
    burst: int = 2


class WorkspaceSlots:
    """One Slack app's calls in a `RateBudget`, scoped by workspace (team) and channel."""

    def __init__(
        self,
        budget: RateBudget,
        updates_per_minute: float,
        app: str = "slack",
        streams: StreamRates | None = None,
    ) -> None:
        self._budget = budget
        self._streams = streams or StreamRates()
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

    def status(
        self, chat: ChatRef, rank: Rank, method: str = "assistant.threads.setStatus"
    ) -> AbstractAsyncContextManager[None]:
        """One assistant.threads.setStatus (or agents.sessions.setStatus): a courtesy (a
        preview) but for the last one of a turn."""
        team = self._team(chat)
        return self._budget.slot(
            f"{team}:status:{chat.chat_id}:{chat.thread_id or '-'}",
            rank,
            interval_s=0.0,
            rates=(Rate(f"{team}:{method}", STATUS_PER_MINUTE / 60, burst=3),),
        )

    def stream(
        self, method: str, chat: ChatRef, ts: str, rank: Rank
    ) -> AbstractAsyncContextManager[None]:
        """One chat.startStream (in the thread's scope), appendStream or stopStream (in the
        message's), each against its method's workspace rate."""
        team = self._team(chat)
        own = (
            f"{team}:thread:{chat.chat_id}:{chat.thread_id or '-'}"
            if method == "chat.startStream"
            else f"{team}:message:{chat.chat_id}:{ts}"
        )
        return self._budget.slot(own, rank, interval_s=0.0, rates=(self._rate(method, chat),))

    async def penalize(self, method: str, chat: ChatRef, retry_after: float) -> None:
        """Slack's 429 for `method`: the workspace's rate for it waits `retry_after`."""
        await self._budget.penalize(self._rate(method, chat).scope, retry_after)

    def _rate(self, method: str, chat: ChatRef) -> Rate:
        per_minute = {
            "chat.appendStream": self._streams.appends_per_minute,
            "chat.startStream": self._streams.starts_per_minute,
            "chat.stopStream": self._streams.stops_per_minute,
        }.get(method)
        if per_minute is not None:
            return Rate(f"{self._team(chat)}:{method}", per_minute / 60, self._streams.burst)
        return self._update_rate(chat) if method == "chat.update" else self._post_rate(chat)

    def _update_rate(self, chat: ChatRef) -> Rate:
        return Rate(f"{self._team(chat)}:chat.update", self._per_second, burst=UPDATE_BURST)

    def _post_rate(self, chat: ChatRef) -> Rate:
        return Rate(
            f"{self._team(chat)}:channel:{chat.chat_id}:post", POSTS_PER_SECOND, burst=POST_BURST
        )

    def _team(self, chat: ChatRef) -> str:
        return f"{self._app}:{chat.team_id or self.home_team}"
