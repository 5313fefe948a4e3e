"""Multi-process mode: every Redis seam built from `redis.*`, on two shared clients."""

from __future__ import annotations

import logging
from collections.abc import Callable

from redis.exceptions import RedisError

from adapters.base import InboundMessage
from bot.ops.readiness import Down
from bot.redis.accounts import RedisAccounts
from bot.redis.budget import RedisRateBudget
from bot.redis.client import RedisHealth, connect, describe
from bot.redis.conversations import RedisConversations
from bot.redis.dedup import RedisDedup
from bot.redis.hub import RedisEventHub
from bot.redis.inbound import RedisInboundRates
from bot.redis.leader import RedisLeader
from bot.redis.quota import RedisQuotaState
from bot.redis.states import redis_conversation_state
from bot.runtime.config.schema import RedisConfig
from tools.redact import redact_credentials

log = logging.getLogger(__name__)

REPLAY_EVENTS = 200  # frames kept per conversation for a reconnecting widget, as in one process


def _serve_here(message: InboundMessage) -> bool:
    """A web socket's message has its turn run in the process its socket is on: the frames go
    to that socket without a pub/sub hop. Others (webhooks, Telegram polled by one leader) go
    to whichever process reads the work first, so the leader does not run every turn."""
    return message.chat.channel == "websocket"


class RedisMode:
    """Owns the clients (one for commands, one for blocking reads) and the event hub's reader."""

    def __init__(
        self,
        config: RedisConfig,
        *,
        dedup_ttl_s: float,
        coalesce_ms: int,
        stopped: Callable[[str], object] = lambda conversation_key: None,
        task_stopped: Callable[[str, str], object] = lambda conversation_key, task_id: None,
    ) -> None:
        """`stopped(key)` and `task_stopped(key, task id)`: a /stop or a TaskStop asked on any
        process, for what runs in this one (its specialists)."""
        assert config.url is not None
        self.url = config.url
        self.redis = connect(config.url)
        self.reader = connect(config.url, reader=True)
        prefix = config.prefix
        self.dedup = RedisDedup(self.redis, prefix=prefix, ttl_s=dedup_ttl_s)
        # read by the queue's own script as it queues a message (no round trip of its own)
        self.states = redis_conversation_state(self.redis, prefix=prefix)
        self.conversations = RedisConversations(
            self.redis,
            self.reader,
            prefix=prefix,
            lease_s=config.lease_s,
            coalesce_ms=coalesce_ms,
            serve_here=_serve_here,
            dedup=self.dedup,  # a plain message: claimed as it is queued
            stopped=stopped,
            task_stopped=task_stopped,
            states=self.states,
        )
        self.budget = RedisRateBudget(self.redis, prefix=prefix)
        self.inbound_rates = RedisInboundRates(self.redis, prefix=prefix)
        self.hub = RedisEventHub(
            self.redis, self.reader, prefix=prefix, replay_events=REPLAY_EVENTS
        )
        self.leader = RedisLeader(self.redis, prefix=prefix, lease_s=config.lease_s)
        # a bot account outlives a leader's hand-over: a lease of a few leader leases
        self.accounts = RedisAccounts(self.redis, prefix=prefix, lease_s=3 * config.lease_s)
        self.quotas = RedisQuotaState(self.redis, prefix=prefix)
        self.health = RedisHealth(self.redis)
        self._open = False

    async def open(self) -> None:
        await self.hub.__aenter__()
        self._open = True
        try:
            await self.redis.ping()
            log.info("multi-process mode: Redis at %s", redact_credentials(self.url))
        except RedisError as exc:  # not fatal: everything retries, /healthz says so
            log.error(
                "Redis at %s does not answer (%s); taking no messages until it does",
                redact_credentials(self.url),
                describe(exc),
            )

    async def ready(self) -> Down | None:
        """The `/readyz` check: a PING, at most once a second (shared with `/healthz`)."""
        state = await self.health.report()
        if state.get("redis") == "ok":
            return None
        return Down(f"unreachable: {state.get('redis_error', 'no answer')}")

    async def close(self) -> None:
        if self._open:
            await self.hub.__aexit__(None, None, None)
            self._open = False
        await self.reader.aclose()
        await self.redis.aclose()
