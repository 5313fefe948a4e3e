"""The `RateBudget` contract: when a call to a platform may go, per scope, by rank.

Every platform limits how often a bot may call it, per chat, per message, per workspace or app,
and answers 429 past that. A channel makes each call inside `budget.slot(...)`; the budget
decides when it may start. The contract, which every implementation passes
(tests/test_rate_budget_contract.py):

Scopes
    A scope is a string the channel chooses, naming what a limit applies to, prefixed with the
    platform and the bot so bots and platforms never share one: `"telegram:<bot>:chat:<id>"`.
    A call has one *own* scope (`scope`): at most one call is in flight in it, and the next starts
    no sooner than `interval_s` after the previous one *finished* (the platform sees arrivals,
    and ours are only known to be spaced if measured from the reply). `interval_s` comes with
    each call, so one budget serves every channel and the channel may change it (a group chat
    is slower than a private one). Scopes are independent: a busy chat holds up no other.
    A call may also count against *shared* scopes (`rates`): a `Rate` lets `per_second` calls
    a second start under it, `burst` of them at once after a quiet spell (GCRA), however many
    own scopes they come from; the bot-wide limit is one, such as
    `Rate("telegram:<bot>", 30, burst=30)`. Calls may overlap in a shared scope.

Ranks
    `final` (the end of an answer) and `send` (a new message) wait for their turn; in a scope,
    waiting finals go before waiting sends, and sends in arrival order. `preview` (an
    intermediate edit, a "typing…" action) never waits: if the own scope is held or awaited,
    or its spacing, a penalty or a shared rate says "not yet", `slot` raises `Busy(retry_after)`
    at once, and the caller retries later with newer text, so stale states are never queued.
    `retry_after` (> 0) is the soonest a retry could succeed, not a promise that it will.
    A preview also yields a shared rate to finals and sends waiting for it in other scopes.

Penalties
    `penalize(scope, retry_after)` records the platform's 429: nothing in that scope (own or
    shared) starts for `retry_after` seconds, whatever its rank. Penalties only lengthen waits.

Release
    A slot is released when its block ends, by return, exception or cancellation; a waiter that
    is cancelled leaves no trace. Across processes an implementation holds a slot as a lease
    that expires, so a crashed process blocks a scope for the lease time at most.

Waits are computed from state (not-before times, the GCRA's theoretical arrival time) and
slept outside any lock, so the state can live in Redis and be updated by one script per
attempt, with the server's clock. Expressing the other platforms (their limits as documented):

- Slack: posts and updates ~1/s per channel → own scope `"slack:<team>:channel:<id>"`,
  `interval_s=1`; `chat.update` is also ~50/min per app per workspace, shared by every stream
  there → each update carries `Rate("slack:<team>:chat.update", 50 / 60, burst=3)`;
  `chat.appendStream` every 3 s per stream → own scope `"slack:<team>:stream:<ts>"`,
  `interval_s=3`.
- Feishu: a card `PATCH` at 5 QPS per message → own scope `"feishu:<app>:message:<id>"`,
  `interval_s=0.2`; the app-wide 50 QPS → `Rate("feishu:<app>", 50, burst=50)`; sends per chat
  → own scope `"feishu:<app>:chat:<id>"`, `interval_s=0.2`. The 20 `PUT` edits per message are
  a count over the message's life, not a pace, so they are the channel's to keep: it spaces a
  message's edits (`interval_s`) so that a usual answer needs fewer, stops previews at 19 and
  keeps the 20th for the final (or streams through CardKit, which has no such cap).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Literal, Protocol

Rank = Literal["final", "send", "preview"]


class Busy(Exception):
    """No slot now for a preview, which does not wait; try again in `retry_after` seconds."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"rate budget busy; retry after {retry_after:.2f}s")
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class Rate:
    """A shared scope: `per_second` calls a second under `scope`, `burst` of them at once."""

    scope: str
    per_second: float
    burst: int = 1

    def __post_init__(self) -> None:
        if self.per_second <= 0 or self.burst < 1:
            raise ValueError(
                f"rate {self.scope!r} needs per_second > 0 and burst >= 1, "
                f"not {self.per_second} and {self.burst}"
            )


class RateBudget(Protocol):
    """When a call may go; see the module docstring for the contract."""

    def slot(
        self, scope: str, rank: Rank, *, interval_s: float, rates: Sequence[Rate] = ()
    ) -> AbstractAsyncContextManager[None]:
        """Hold `scope` for one call, spaced `interval_s` from the last, and count it in `rates`.

        Finals and sends wait their turn; previews raise `Busy` instead of waiting.
        """
        ...

    async def penalize(self, scope: str, retry_after: float) -> None:
        """The platform said 429: nothing starts in `scope` for `retry_after` seconds."""
        ...
