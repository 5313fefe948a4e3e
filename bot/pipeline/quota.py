"""Usage quotas: turns and tokens per user and per conversation, per minute and per UTC day.

The turn runner asks `Quotas.admit` after the placeholder is up and before any model work: over
a limit, the placeholder says which limit and when it resets, and the model is never called.
A turn's tokens are known only once it has run, so `spend` adds them at its end: the token
limits are soft (the turn that crosses a limit finishes; the next one is refused). Turn limits
are exact: `take` checks every bucket and counts the turn in one step. (The store does that step
under a lock of its process only: processes sharing a database without Redis may both admit the
last turn; with `redis.url` the counters are in Redis, one script per step.)

The counters sit behind the `QuotaState` seam, like dedup: in memory (tests, `bot chat`), in
the store (SQLite or PostgreSQL: the `quota_counters` table), in Redis (bot/redis/quota.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from adapters.base import InboundMessage
from bot.pipeline.turn_line import user_hash
from bot.runtime.config.schema import QuotaLimits, QuotasConfig
from bot.storage.roles import QuotaRecords
from content.texts import DEFAULT_LANGUAGE, t

log = logging.getLogger(__name__)

Counts = tuple[int, int]  # turns, tokens
Bucket = tuple[str, float]  # a bucket and when it may be forgotten (unix seconds)
WINDOWS = (("minute", 60), ("day", 86400))  # UTC days start at 00:00 UTC: epoch seconds align
# a background result, a crash's resumption: never refused, but their tokens count
SYSTEM_EVENTS = ("task:", "resume:")


@dataclass(frozen=True, slots=True)
class Check:
    """A bucket a new turn counts in, with its window's limits (None: no such limit)."""

    bucket: str
    turns: int | None
    tokens: int | None
    expires_at: float

    def reached(self, counts: dict[str, Counts]) -> bool:
        turns, tokens = counts.get(self.bucket, (0, 0))
        return (self.turns is not None and turns >= self.turns) or (
            self.tokens is not None and tokens >= self.tokens
        )


class QuotaState(Protocol):
    """Counters per bucket. A bucket names a scope and one window start, so a new window is a
    new bucket; `expires_at` (unix seconds) only says when a bucket may be forgotten."""

    async def counts(self, buckets: Sequence[str]) -> dict[str, Counts]:
        """(turns, tokens) of each bucket that has any; a bucket never added to is absent."""
        ...

    async def add(self, bucket: str, *, turns: int, tokens: int, expires_at: float) -> None: ...

    async def add_each(self, buckets: Sequence[Bucket], *, turns: int, tokens: int) -> None:
        """`add` to each (bucket, expires_at), in one step where the backing allows."""
        ...

    async def take(self, checks: Sequence[Check]) -> dict[str, Counts] | None:
        """As one step: if no check has reached a limit, add one turn to each bucket and return
        None; otherwise add nothing and return the `counts` of the buckets (to say which)."""
        ...


class StoreQuotaState:
    """Counters in the store (SQLite: `quota_counters`), shared by processes on one file."""

    def __init__(self, store: QuotaRecords) -> None:
        self.store = store
        self._taking = asyncio.Lock()  # a read and its additions are one step in this process

    async def take(self, checks: Sequence[Check]) -> dict[str, Counts] | None:
        async with self._taking:
            counts = await self.counts([check.bucket for check in checks])
            if any(check.reached(counts) for check in checks):
                return counts
            for check in checks:
                await self.add(check.bucket, turns=1, tokens=0, expires_at=check.expires_at)
            return None

    async def counts(self, buckets: Sequence[str]) -> dict[str, Counts]:
        return await self.store.quota_counts(buckets)

    async def add_each(self, buckets: Sequence[Bucket], *, turns: int, tokens: int) -> None:
        for bucket, expires_at in buckets:
            await self.add(bucket, turns=turns, tokens=tokens, expires_at=expires_at)

    async def add(self, bucket: str, *, turns: int, tokens: int, expires_at: float) -> None:
        await self.store.quota_add(bucket, turns=turns, tokens=tokens, expires_at=expires_at)


class MemoryQuotaState:
    """Counters in this process; expired buckets are dropped as new ones are added."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._buckets: dict[str, tuple[int, int, float]] = {}

    async def counts(self, buckets: Sequence[str]) -> dict[str, Counts]:
        now = self._clock()
        found = ((b, self._buckets.get(b)) for b in buckets)
        return {b: (c[0], c[1]) for b, c in found if c is not None and c[2] > now}

    async def add_each(self, buckets: Sequence[Bucket], *, turns: int, tokens: int) -> None:
        for bucket, expires_at in buckets:
            await self.add(bucket, turns=turns, tokens=tokens, expires_at=expires_at)

    async def take(self, checks: Sequence[Check]) -> dict[str, Counts] | None:
        counts = await self.counts([check.bucket for check in checks])  # returns without a wait
        if any(check.reached(counts) for check in checks):
            return counts
        for check in checks:
            await self.add(check.bucket, turns=1, tokens=0, expires_at=check.expires_at)
        return None

    async def add(self, bucket: str, *, turns: int, tokens: int, expires_at: float) -> None:
        now = self._clock()
        if bucket not in self._buckets:
            for stale in [b for b, c in self._buckets.items() if c[2] <= now]:
                del self._buckets[stale]
        old_turns, old_tokens, old_expiry = self._buckets.get(bucket, (0, 0, 0.0))
        self._buckets[bucket] = (
            old_turns + turns,
            old_tokens + tokens,
            max(old_expiry, expires_at),
        )


@dataclass(frozen=True, slots=True)
class SoftReached:
    """A scope past its soft ratio in a window: the turn moves to the cheaper model. `mark`
    names the scope's window, so a conversation is told once per window."""

    whose: str  # user, conversation, address, key
    window: str  # minute, day
    mark: str


class BudgetObserver(Protocol):
    """Told once per scope and window when a scope crosses its soft limit (bot/ops/metrics.py)."""

    def soft_limit_crossed(self, scope: str) -> None: ...


@dataclass(frozen=True, slots=True)
class _Scope:
    key: str  # "user:telegram:42", "conversation:telegram:-100:7"
    limits: QuotaLimits
    whose: str  # for the reply: `quota.who.<whose>` (user, conversation, address, key)


@dataclass(frozen=True, slots=True)
class _Window:
    name: str
    start: int
    end: int

    def bucket(self, scope: _Scope) -> str:
        return f"{scope.key}:{self.name}:{self.start}"


class Quotas:
    """The configured limits, checked against a `QuotaState`."""

    def __init__(
        self,
        config: QuotasConfig,
        state: QuotaState,
        *,
        clock: Callable[[], float] = time.time,
        observer: BudgetObserver | None = None,
    ) -> None:
        self.config = config
        self.observer = observer
        self.state = state
        self._clock = clock
        self._exempt = frozenset(config.exempt_users)
        self._per_client = {"address": config.per_address, "key": config.per_api_key}
        self._all = (config.per_user, config.per_conversation, *self._per_client.values())
        self.enabled = any(
            v is not None for x in self._all for k, v in x.model_dump().items() if k != "soft_ratio"
        )

    @property
    def counts_tokens(self) -> bool:
        """Whether any token limit is set (else a turn's tokens need not be looked up)."""
        return any(
            x.tokens_per_day is not None or x.tokens_per_minute is not None for x in self._all
        )

    async def admit(self, message: InboundMessage, language: str = DEFAULT_LANGUAGE) -> str | None:
        """None, and the turn is counted; or the reply that says which limit was reached (in
        `language`)."""
        if message.event_id.startswith(SYSTEM_EVENTS):
            return None  # work the user was admitted for already
        pairs = self._limited(message)
        if not pairs:
            return None
        checks = [
            Check(window.bucket(scope), *_limits(scope.limits, window.name), window.end)
            for scope, window in pairs
        ]
        counts = await self.state.take(checks)
        if counts is None:
            return None  # admitted and counted
        now = self._clock()
        refusals: list[tuple[int, str]] = []
        for scope, window in pairs:
            turns, tokens = counts.get(window.bucket(scope), (0, 0))
            reply = _over(scope, window, turns, tokens, now, language)
            if reply is not None:
                refusals.append((window.end, reply))
        # the limit that lasts longest is the one worth telling
        return max(refusals, default=(0, None))[1]

    async def spend(self, message: InboundMessage, tokens: int) -> None:
        """Add a finished turn's tokens (its specialists' included) to its windows."""
        if tokens <= 0:
            return
        buckets = [(window.bucket(scope), window.end) for scope, window in self._limited(message)]
        if buckets:
            await self.state.add_each(buckets, turns=0, tokens=tokens)

    async def soft(self, message: InboundMessage) -> SoftReached | None:
        """The first scope of the message past its soft ratio of a limit (this turn counted),
        or None. A scope's first crossing in a window is logged and counted once, across
        processes (a marker bucket taken once: `QuotaState.take`)."""
        pairs = [(s, w) for s, w in self._limited(message) if s.limits.soft_ratio is not None]
        if not pairs:
            return None
        counts = await self.state.counts([window.bucket(scope) for scope, window in pairs])
        reached: SoftReached | None = None
        for scope, window in pairs:
            bucket = window.bucket(scope)
            what = _past_soft(scope.limits, window.name, *counts.get(bucket, (0, 0)))
            if what is None:
                continue
            await self._crossed(scope, window, bucket, f"{what} a {window.name}")
            reached = reached or SoftReached(scope.whose, window.name, bucket)
        return reached

    async def _crossed(self, scope: _Scope, window: _Window, bucket: str, what: str) -> None:
        """The log line and the metric, once per scope and window: the marker's one turn."""
        marker = Check(f"{bucket}:soft", 1, None, window.end)
        if await self.state.take([marker]) is not None:
            return  # crossed before (here or on another process)
        name = scope.key if scope.whose == "key" else f"{scope.whose} {user_hash(scope.key)}"
        log.warning("quota: %s crossed its soft limit (%s): the cheaper model answers", name, what)
        if self.observer is not None:
            self.observer.soft_limit_crossed(scope.whose)

    def _limited(self, message: InboundMessage) -> list[tuple[_Scope, _Window]]:
        """Each scope of the message with each window it has a limit in."""
        scopes = self._scopes(message) if self.enabled else []
        if not scopes:
            return []
        now = int(self._clock())
        pairs: list[tuple[_Scope, _Window]] = []
        for name, size in WINDOWS:
            window = _Window(name, now - now % size, now - now % size + size)
            pairs.extend((s, window) for s in scopes if _limits(s.limits, name) != (None, None))
        return pairs

    def _scopes(self, message: InboundMessage) -> list[_Scope]:
        user = f"{message.chat.channel}:{message.user_id}"
        if {message.user_id, user} & self._exempt:
            return []
        scopes = [
            _Scope(f"user:{user}", self.config.per_user, "user"),
            _Scope(
                f"conversation:{message.conversation_key}",
                self.config.per_conversation,
                "conversation",
            ),
        ]
        kind = (message.client or "").partition(":")[0]
        if kind in self._per_client:  # a new visitor id or API session is the same client
            key = f"client:{message.chat.channel}:{message.client}"
            scopes.append(_Scope(key, self._per_client[kind], kind))
        return scopes


def _limits(limits: QuotaLimits, window: str) -> tuple[int | None, int | None]:
    """(turns, tokens) limits of one window; None where unset."""
    if window == "day":
        return limits.turns_per_day, limits.tokens_per_day
    return limits.turns_per_minute, limits.tokens_per_minute


def _past_soft(limits: QuotaLimits, window: str, turns: int, tokens: int) -> str | None:
    """Which of a window's limits the counts are past the soft ratio of (for the log), if any."""
    ratio = limits.soft_ratio or 1.0
    turn_limit, token_limit = _limits(limits, window)
    if turn_limit is not None and turns >= ratio * turn_limit:
        return f"{turns} of {turn_limit} turns"
    if token_limit is not None and tokens >= ratio * token_limit:
        return f"{tokens} of {token_limit} tokens"
    return None


def _over(
    scope: _Scope, window: _Window, turns: int, tokens: int, now: float, language: str
) -> str | None:
    turn_limit, token_limit = _limits(scope.limits, window.name)
    if turn_limit is not None and turns >= turn_limit:
        what = t(language, f"quota.messages.{window.name}", count=turn_limit)
    elif token_limit is not None and tokens >= token_limit:
        what = t(language, f"quota.tokens.{window.name}", count=token_limit)
    else:
        return None
    who = t(language, f"quota.who.{scope.whose}")
    if window.name == "day":
        return t(language, "quota.day", who=who, what=what)
    at = datetime.fromtimestamp(window.end, UTC).strftime("%H:%M:%S")
    wait = max(1, round(window.end - now))
    return t(language, "quota.minute", who=who, what=what, at=at, wait=wait)
