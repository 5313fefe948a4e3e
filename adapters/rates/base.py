"""Inbound rate limits: every socket of one identity, every process, draws on one bucket.

A limit per socket was no limit: 60 sockets of one visitor got 60 times the rate; nor was a
limit per process: N processes behind a round-robin balancer gave a user N times the rate.

The seam is `InboundRates`: a channel that limits its users (the web socket per conversation,
the sessions API per session) asks `take(scope, per_minute)` for each message: 0 lets it
through and counts it; more than 0 is how many seconds until one would be let through, and the
message is not counted. A scope names the channel and what is limited (`"websocket:<identity>"`,
`"api:<session>"`). The limit is a token bucket of `burst(per_minute)` messages refilled at
`per_minute / 60` a second (a GCRA, the same thing, in Redis): a quiet user may send a few at
once, a busy one no more than the rate. `LocalInboundRates` (local.py) counts in this process;
`RedisInboundRates` (bot/redis/inbound.py) counts every process's messages in one place. Both
pass tests/test_inbound_rates_contract.py.
"""

from __future__ import annotations

from typing import Protocol


def burst(per_minute: int) -> int:
    """Messages a quiet user may send at once: up to 10, never more than a minute's worth."""
    return min(10, per_minute)


class InboundRates(Protocol):
    async def take(self, scope: str, per_minute: int) -> float:
        """Count one message in `scope`: 0.0 if it may go, else seconds until one may (> 0)."""
        ...
