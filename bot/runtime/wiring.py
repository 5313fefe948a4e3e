"""The app's parts built from config: the Redis or embedded choice, the channels' services, the agent.

`bot/runtime/app.py` owns the parts and runs them; building them is here, so that the one place that
decides which seam is shared (Redis) and which stays in this process (embedded) reads on its
own, and so that the app names no channel: channels plug in through `adapters.registry`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapters.accounts import Accounts, FileAccounts
from adapters.base import BlobLinks, InboundMessage
from adapters.rates import LocalInboundRates
from adapters.registry import ChannelServices, instance_name, sections
from agent.coordinator import AgentSettings, Coordinator
from agent.loop import LoopSettings
from agent.personas import Persona, PersonaLibrary
from agent.providers.base import Provider
from agent.workers import Deliver, Workers, WorkerSettings
from bot.ops.operations import Operations
from bot.pipeline.access import AccessRules
from bot.pipeline.conversation_state import ConversationState, StoredConversationState
from bot.pipeline.conversations import ConversationQueue, LocalConversations
from bot.pipeline.dedup import ClaimsAhead, Dedup, StoreDedup
from bot.pipeline.gateway_settings import GatewaySettings
from bot.pipeline.persona_choice import PersonaChoice
from bot.pipeline.quota import QuotaState, StoreQuotaState
from bot.pipeline.resume import ResumeSettings
from bot.pipeline.transcript import StoreHistory
from bot.pipeline.voice import Hearing
from bot.runtime.config import Config, ConfigError
from bot.speech.base import SpeechObserver
from bot.storage import StorageError
from bot.storage.backends import AnyStore
from content.blobs import BlobStore
from tools.approval import ApprovalGate
from tools.base import HumanHandoff, ScheduleDesk, ToolDeps
from tools.knowledge import KnowledgeBase
from tools.redirects import load_redirects
from tools.registry import ToolRegistry
from tools.shared_http import SharedSession

if TYPE_CHECKING:  # imported where built: redis and openai cost a start that uses neither
    from bot.redis.mode import RedisMode

log = logging.getLogger(__name__)


def redis_mode(
    config: Config,
    *,
    web_server: bool,
    stopped: Callable[[str], object],
    task_stopped: Callable[[str, str], object],
) -> RedisMode | None:
    """redis.url set: the shared seams live in Redis, so any number of processes share the
    work. Not for `bot chat` (no web server): its channel lives in that process only, so no
    other process could run its turns. `stopped` and `task_stopped` hear a /stop or a
    TaskStop asked on any process."""
    if not (config.redis.url and web_server):
        return None
    from bot.redis.mode import RedisMode

    return RedisMode(
        config.redis,
        dedup_ttl_s=config.gateway.dedup_ttl_s,
        coalesce_ms=config.gateway.coalesce_ms,
        stopped=stopped,
        task_stopped=task_stopped,
    )


def channel_services(
    config: Config,
    store: AnyStore,
    ops: Operations,
    redis: RedisMode | None,
    *,
    admits: Callable[[InboundMessage], bool],
    persona_name: Callable[[], str],
    data_dir: Path | None,
    media: tuple[BlobStore, BlobLinks | None, bytes | None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    introduction: Callable[[], Mapping[str, Any]] = dict,
) -> ChannelServices:
    """What every channel factory is handed: the server's facts and the shared seams.
    `data_dir`: the database's folder (None: in memory), where this process's account locks go
    when no Redis spans the processes; `media`: the blob store, its signed links and the upload
    key (files to and from clients)."""
    accounts: Accounts | None = redis.accounts if redis else None
    if accounts is None and data_dir is not None:
        accounts = FileAccounts(data_dir / "accounts")
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
        # embedded, the gateway claims in the store (conversation_seams below)
        gateway_claims=None if redis else ClaimsAhead(store, ttl_s=config.gateway.dedup_ttl_s),
        answered=_answered(store),
        event_hub=redis.hub if redis else None,
        rate_budget=redis.budget if redis else None,
        # in this process's memory unless Redis spans the processes; one for every channel
        inbound_rates=redis.inbound_rates if redis else LocalInboundRates(clock=clock),
        leader=redis.leader if redis else None,
        accounts=accounts,
        latest_conversation=_latest_conversation(store),
        blobs=blobs,
        blob_links=links,
        upload_secret=uploads,
        introduction=introduction,
        menu=offered_commands(config),
    )


def offered_commands(config: Config) -> tuple[str, ...]:
    """The commands beyond every chat's that this config offers, for the channels' menus."""
    offered = {
        "human": config.handoff.place is not None,
        "schedule": config.schedules.enabled,
        "model": bool(config.llm.choices),
        "persona": bool(config.personas.switchable),
    }
    return tuple(name for name, on in offered.items() if on)


def introduction(persona: Persona) -> dict[str, Any]:
    """What an empty conversation shows of the coordinator: the keys its persona file sets."""
    fields: dict[str, Any] = {
        "bot_name": persona.display_name,
        "welcome": persona.welcome,
        "suggestions": list(persona.suggestions),
    }
    return {key: value for key, value in fields.items() if value}


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


def loop_settings(config: Config) -> LoopSettings:
    """How every tool loop runs, the coordinator's and the specialists': one place."""
    agent = config.agent
    return LoopSettings(
        max_rounds=agent.max_rounds,
        tool_timeout_s=agent.tool_timeout_s,
        globs=tuple(config.approvals.tools),
        exempt=tuple(config.approvals.exempt),
    )


def build_workers(
    config: Config,
    provider: Provider,
    registry: ToolRegistry,
    store: AnyStore,
    personas: PersonaLibrary,
    redis: RedisMode | None,
    deliver: Deliver,
) -> Workers:
    """The specialists the coordinator delegates to, within the agent section's limits; their
    background results go to `deliver`."""
    agent = config.agent
    return Workers(
        provider=provider,
        registry=registry,
        store=store,
        personas=personas,
        deliver=deliver,
        # a TaskStop for a specialist another process runs
        stop_elsewhere=redis.conversations.stop_task if redis else None,
        settings=WorkerSettings(
            max_per_turn=agent.max_workers,
            max_total=agent.max_workers_total,
            timeout_s=agent.worker_timeout_s,
            result_chars=agent.worker_result_chars,
            loop=loop_settings(config),
        ),
    )


def tool_deps(
    config: Config,
    http: SharedSession,
    knowledge: KnowledgeBase,
    workers: Workers,
    blobs: BlobStore | None,
    schedules: ScheduleDesk | None = None,
    handoff: HumanHandoff | None = None,
) -> ToolDeps:
    """What every tool call (and the model's requests, for media parts) may reach, built once
    with the app."""
    return ToolDeps(
        settings=config.tools,
        default_timezone=config.agent.default_timezone,
        http=http,
        knowledge=knowledge,
        agents=workers,
        blobs=blobs,
        schedules=schedules,
        handoff=handoff,
    )


def build_coordinator(
    config: Config,
    provider: Provider,
    registry: ToolRegistry,
    store: AnyStore,
    personas: PersonaLibrary,
    deps: ToolDeps,
    gate: ApprovalGate | None = None,
) -> Coordinator:
    """The agent that answers a turn; `deps` are what its tools may reach; `gate` who is asked
    before a call that needs approval."""
    return Coordinator(
        provider=provider,
        registry=registry,
        store=store,
        settings=AgentSettings(
            loop=loop_settings(config),
            context_budget_tokens=config.agent.context_budget_tokens,
        ),
        personas=personas,
        redirects=load_redirects(),
        deps=deps,
        gate=gate,
    )


def conversation_seams(
    config: Config, store: AnyStore, redis: RedisMode | None
) -> tuple[ConversationQueue, Dedup]:
    """The conversations' queue and the event claims: Redis's (shared by every process), or
    this process's queue and the store's claims (embedded)."""
    if redis is not None:
        return redis.conversations, redis.dedup
    return (
        LocalConversations(coalesce_ms=config.gateway.coalesce_ms),
        StoreDedup(store, ttl_s=config.gateway.dedup_ttl_s),
    )


def conversation_states(
    store: AnyStore, redis: RedisMode | None, *, alone: bool
) -> ConversationState:
    """Where conversations' modes and settings live: in Redis (read by the queue's script), or
    in the store (`alone`: this process is their only writer, and keeps what it read)."""
    if redis is not None:
        return redis.states
    return StoredConversationState(store, alone=alone)


def quota_state(store: AnyStore, redis: RedisMode | None) -> QuotaState:
    """Where quotas are counted: in Redis (across processes) or in the store."""
    return redis.quotas if redis else StoreQuotaState(store)


def access_rules(config: Config) -> AccessRules:
    """Who may talk to the bot, and when it answers in groups, per channel section."""
    return AccessRules.of(
        allowed_users=config.gateway.allowed_users,
        group_reply=config.gateway.group_reply,
        sections={
            instance_name(spec, section): section for spec, section in sections(config.channels)
        },
    )


def persona_choice(config: Config, default: str) -> PersonaChoice:
    """`default` answers everywhere but on channel instances whose section names a `persona`."""
    by_channel = {
        instance_name(spec, section): section.persona
        for spec, section in sections(config.channels)
        if section.persona and getattr(section, "enabled", False)
    }
    return PersonaChoice(default, by_channel)


def check_personas(choice: PersonaChoice, personas: PersonaLibrary) -> None:
    """Every persona a channel instance names must exist (a typo would fail every turn there)."""
    for channel, name in choice.by_channel.items():
        try:
            personas.get(name)
        except KeyError as exc:
            raise ConfigError(f"channels ({channel}): persona: {exc.args[0]}") from None


def hearing(config: Config, blobs: BlobStore | None, observer: SpeechObserver) -> Hearing:
    """Voice notes' speech to text: `stt`'s endpoint, or none while `stt.base_url` is null
    (their senders are told voice is not on)."""
    stt = config.stt
    transcriber = None
    if stt.base_url:
        from bot.speech.openai import OpenAITranscriber

        transcriber = OpenAITranscriber(
            base_url=stt.base_url,
            model=stt.model,
            api_key=stt.api_key,
            language=stt.language,
            timeout_s=stt.timeout_s,
            max_bytes=stt.max_bytes,
        )
    return Hearing(transcriber, blobs, concurrency=stt.concurrency, observer=observer)


def gateway_settings(config: Config, persona: PersonaChoice) -> GatewaySettings:
    agent = config.agent
    return GatewaySettings(
        turn_timeout_s=agent.turn_timeout_s,
        persona=persona,
        resume=ResumeSettings(agent.resume_max_age_s, agent.resume_max_attempts),
        language=config.gateway.language,
    )
