"""The app's parts built from config: the Redis or embedded choice, the channels' services, the agent.

`bot/app.py` owns the parts and runs them; building them is here, so that the one place that
decides which seam is shared (Redis) and which stays in this process (embedded) reads on its
own, and so that the app names no channel: channels plug in through `adapters.registry`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from adapters.base import BlobLinks, InboundMessage
from adapters.registry import ChannelServices, sections
from agent.coordinator import AgentSettings, Coordinator
from agent.personas import PersonaLibrary
from agent.providers.base import Provider
from agent.workers import Workers, WorkerSettings
from bot.access import AccessRules
from bot.config import Config
from bot.conversations import ConversationQueue, LocalConversations
from bot.dedup import Dedup, StoreDedup
from bot.ops import Operations
from bot.quota import QuotaState, StoreQuotaState
from bot.redis.mode import RedisMode
from bot.storage import StorageError
from bot.storage.backends import AnyStore
from bot.transcript import StoreHistory
from content.blobs import BlobStore
from tools.knowledge import KnowledgeBase
from tools.redirects import load_redirects
from tools.registry import ToolRegistry

log = logging.getLogger(__name__)


def redis_mode(config: Config, *, web_server: bool) -> RedisMode | None:
    """redis.url set: the shared seams live in Redis, so any number of processes share the
    work. Not for `bot chat` (no web server): its channel lives in that process only, so no
    other process could run its turns."""
    if not (config.redis.url and web_server):
        return None
    return RedisMode(
        config.redis,
        dedup_ttl_s=config.gateway.dedup_ttl_s,
        coalesce_ms=config.gateway.coalesce_ms,
    )


def channel_services(
    config: Config,
    store: AnyStore,
    ops: Operations,
    redis: RedisMode | None,
    *,
    admits: Callable[[InboundMessage], bool],
    persona_name: Callable[[], str],
    media: tuple[BlobStore, BlobLinks | None, bytes | None] | None = None,
) -> ChannelServices:
    """What every channel factory is handed: the server's facts and the shared seams; `media`:
    the blob store, its signed links and the upload key (files to and from clients)."""
    blobs, links, uploads = media if media is not None else (None, None, None)
    return ChannelServices(
        public_url=config.server.public_url,
        # replies a channel sends on its own (to stickers, say) obey the access policy
        admits=admits,
        platform_calls=ops.platform_calls,
        session_records=store,
        # what a reload shows after a restart, and resends known after one
        history=StoreHistory(store, persona_name),
        claims=StoreDedup(store, ttl_s=config.gateway.dedup_ttl_s),
        answered=_answered(store),
        event_hub=redis.hub if redis else None,
        rate_budget=redis.budget if redis else None,
        inbound_rates=redis.inbound_rates if redis else None,
        leader=redis.leader if redis else None,
        latest_conversation=_latest_conversation(store),
        blobs=blobs,
        blob_links=links,
        upload_secret=uploads,
    )


def _answered(store: AnyStore) -> Callable[[str], Awaitable[bool]]:
    async def answered(conversation_key: str) -> bool:
        """Whether a turn was answered in this conversation (a Slack thread, say), durably."""
        try:
            return await store.conversation_chat(conversation_key) is not None
        except StorageError as exc:
            log.warning("cannot tell whether %s was answered before: %s", conversation_key, exc)
            return False

    return answered


def _latest_conversation(store: AnyStore) -> Callable[[str, str, str], Awaitable[str | None]]:
    async def latest_conversation(channel: str, key_prefix: str, user: str) -> str | None:
        """The conversation under `key_prefix` with the user's newest turn (a Slack thread)."""
        try:
            return await store.latest_conversation(
                channel=channel, key_prefix=key_prefix, user_id=user
            )
        except StorageError as exc:
            log.warning("cannot find the latest conversation under %s: %s", key_prefix, exc)
            return None

    return latest_conversation


def build_workers(
    config: Config,
    provider: Provider,
    registry: ToolRegistry,
    store: AnyStore,
    personas: PersonaLibrary,
) -> Workers:
    """The specialists the coordinator delegates to, within the agent section's limits."""
    agent = config.agent
    return Workers(
        provider=provider,
        registry=registry,
        store=store,
        personas=personas,
        settings=WorkerSettings(
            max_per_turn=agent.max_workers,
            max_total=agent.max_workers_total,
            timeout_s=agent.worker_timeout_s,
            result_chars=agent.worker_result_chars,
            max_rounds=agent.max_rounds,
            tool_timeout_s=agent.tool_timeout_s,
        ),
    )


def build_coordinator(
    config: Config,
    provider: Provider,
    registry: ToolRegistry,
    store: AnyStore,
    personas: PersonaLibrary,
    workers: Workers,
    knowledge: KnowledgeBase,
) -> Coordinator:
    """The agent that answers a turn; its `services` are what its tools may reach."""
    agent = config.agent
    return Coordinator(
        provider=provider,
        registry=registry,
        store=store,
        settings=AgentSettings(
            max_rounds=agent.max_rounds,
            tool_timeout_s=agent.tool_timeout_s,
            context_budget_tokens=agent.context_budget_tokens,
        ),
        personas=personas,
        redirects=load_redirects(),
        services={
            "default_timezone": agent.default_timezone,
            "agents": workers,
            "tools_config": config.tools,
            "knowledge": knowledge,
        },
    )


def conversation_seams(
    config: Config, store: AnyStore, redis: RedisMode | None, workers: Workers
) -> tuple[ConversationQueue, Dedup]:
    """The conversations' queue and the event claims: Redis's (shared by every process), or
    this process's queue and the store's claims (embedded)."""
    if redis is not None:
        # a /stop asked on any process stops the specialists running on this one
        redis.conversations.stop_hooks.append(workers.stop_conversation)
        redis.conversations.task_stop_hooks.append(workers.stop_task)
        workers.stop_elsewhere = redis.conversations.stop_task
        return redis.conversations, redis.dedup
    return (
        LocalConversations(coalesce_ms=config.gateway.coalesce_ms),
        StoreDedup(store, ttl_s=config.gateway.dedup_ttl_s),
    )


def quota_state(store: AnyStore, redis: RedisMode | None) -> QuotaState:
    """Where quotas are counted: in Redis (across processes) or in the store."""
    return redis.quotas if redis else StoreQuotaState(store)


def access_rules(config: Config) -> AccessRules:
    """Who may talk to the bot, and when it answers in groups, per channel section."""
    return AccessRules.of(
        allowed_users=config.gateway.allowed_users,
        group_reply=config.gateway.group_reply,
        sections={spec.name: section for spec, section in sections(config.channels)},
    )
