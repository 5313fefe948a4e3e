"""Wiring: build storage, personas, tools, model, gateway and channels from config, and run them."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp
from aiohttp import web

from adapters.base import Channel, ChannelError, ChannelRevoked, HealthReport, WebRoutes
from adapters.registry import ChannelServices, build_enabled, sections
from agent.coordinator import AgentSettings, Coordinator
from agent.personas import PersonaLibrary
from agent.providers import build_provider, describe_provider
from agent.providers.base import Provider
from agent.workers import Workers, WorkerSettings
from bot.access import AccessRules
from bot.admin import AdminSources, AdminView
from bot.config import Config, ConfigError
from bot.conversations import ConversationQueue, LocalConversations
from bot.dedup import Dedup, StoreDedup
from bot.gateway import Gateway, GatewaySettings
from bot.health import ChannelStates
from bot.ops import Operations, metrics_enabled
from bot.quota import Quotas, StoreQuotaState
from bot.recovery import recover_interrupted_turns
from bot.redis.mode import RedisMode
from bot.resume import ResumeSettings
from bot.storage import StorageError
from bot.storage.backends import build_store
from bot.transcript import StoreHistory
from tools.builtin import builtin_registry
from tools.control import CONTROL
from tools.knowledge import KnowledgeBase
from tools.redirects import load_redirects
from tools.registry import ToolRegistry

log = logging.getLogger(__name__)

READY = web.AppKey("ready", dict)
KEEPALIVE_S = 75.0  # aiohttp's default is 3,630 s


class App:
    """The running gateway. `async with App(config) as app:` starts it; leaving stops it cleanly."""

    def __init__(
        self,
        config: Config,
        *,
        base_dir: Path | None = None,
        provider: Provider | None = None,
        registry: ToolRegistry | None = None,
        channels: list[Channel] | None = None,
        persona: str = "default",
        web_server: bool = True,
        metrics: bool | None = None,
    ) -> None:
        """`metrics`: count for /metrics (None: unless the environment says BOT_METRICS=off)."""
        self.config = config
        self.base_dir = base_dir or Path.cwd()
        self.ops = Operations(metrics=metrics_enabled() if metrics is None else metrics)
        self._own_provider = provider is None  # a provider handed in is closed by its owner
        self.provider = provider or build_provider(config.llm)
        self.registry = registry or builtin_registry(config.tools.intake)
        served = self.ops.meter(self.provider, self.registry)  # what the agent calls
        self.registry.pii = config.tools.pii.masker()
        self.knowledge = KnowledgeBase(
            [self._path(d) for d in config.knowledge.dirs],
            passage_chars=config.knowledge.passage_chars,
            max_results=config.knowledge.max_results,
        )
        self.http: aiohttp.ClientSession | None = None  # for tools; opened with the app
        for control in CONTROL:
            if control.name not in self.registry:
                self.registry.add(control)
        self.store = build_store(self._path(config.storage.path), config.storage.url)
        self.personas = PersonaLibrary(
            [self._path(d) for d in config.personas.dirs], known_tools=self.registry.names()
        )
        self.channels: dict[str, Channel] = {c.name: c for c in channels or []}
        # redis.url set: the shared seams live in Redis, so any number of processes share the
        # work. Not for `bot chat`: its channel lives in that process only, so no other process
        # could run its turns.
        self.redis = (
            RedisMode(
                config.redis,
                dedup_ttl_s=config.gateway.dedup_ttl_s,
                coalesce_ms=config.gateway.coalesce_ms,
            )
            if config.redis.url and web_server
            else None
        )
        # `bot chat` (no web server) runs none: a polling channel would steal a serving bot's updates
        if web_server:
            services = ChannelServices(
                public_url=config.server.public_url,
                # replies a channel sends on its own (to stickers, say) obey the access policy
                admits=lambda message: self.gateway.access.check(message) == "allow",
                platform_calls=self.ops.platform_calls,
                session_records=self.store,
                # what a reload shows after a restart, and resends known after one
                history=StoreHistory(self.store, self._persona_name),
                claims=StoreDedup(self.store, ttl_s=config.gateway.dedup_ttl_s),
                answered=self._answered,
                event_hub=self.redis.hub if self.redis else None,
                rate_budget=self.redis.budget if self.redis else None,
                inbound_rates=self.redis.inbound_rates if self.redis else None,
                leader=self.redis.leader if self.redis else None,
                latest_conversation=self._latest_conversation,
            )
            for channel in build_enabled(config.channels, services):
                self.channels[channel.name] = channel
        agent = config.agent
        self.workers = Workers(
            provider=served,
            registry=self.registry,
            store=self.store,
            personas=self.personas,
            settings=WorkerSettings(
                max_per_turn=agent.max_workers,
                max_total=agent.max_workers_total,
                timeout_s=agent.worker_timeout_s,
                result_chars=agent.worker_result_chars,
                max_rounds=agent.max_rounds,
                tool_timeout_s=agent.tool_timeout_s,
            ),
        )
        self.coordinator = Coordinator(
            provider=served,
            registry=self.registry,
            store=self.store,
            settings=AgentSettings(
                max_rounds=agent.max_rounds,
                tool_timeout_s=agent.tool_timeout_s,
                context_budget_tokens=agent.context_budget_tokens,
            ),
            personas=self.personas,
            redirects=load_redirects(),
            services={
                "default_timezone": agent.default_timezone,
                "agents": self.workers,
                "tools_config": config.tools,
                "knowledge": self.knowledge,
            },
        )
        self.conversations: ConversationQueue
        dedup: Dedup
        if self.redis is not None:
            self.conversations, dedup = self.redis.conversations, self.redis.dedup
            # a /stop asked on any process stops the specialists running on this one
            self.redis.conversations.stop_hooks.append(self.workers.stop_conversation)
            self.redis.conversations.task_stop_hooks.append(self.workers.stop_task)
            self.workers.stop_elsewhere = self.redis.conversations.stop_task
        else:
            self.conversations = LocalConversations(coalesce_ms=config.gateway.coalesce_ms)
            dedup = StoreDedup(self.store, ttl_s=config.gateway.dedup_ttl_s)
        self.gateway = Gateway(
            channels=self.channels,
            coordinator=self.coordinator,
            store=self.store,
            personas=self.personas,
            dedup=dedup,
            conversations=self.conversations,
            settings=GatewaySettings(
                turn_timeout_s=agent.turn_timeout_s,
                persona=persona,
                resume=ResumeSettings(agent.resume_max_age_s, agent.resume_max_attempts),
            ),
            access=AccessRules.of(
                allowed_users=config.gateway.allowed_users,
                group_reply=config.gateway.group_reply,
                sections={spec.name: section for spec, section in sections(config.channels)},
            ),
            workers=self.workers,
            metrics=self.ops.gateway_metrics,
            quotas=Quotas(
                config.quotas, self.redis.quotas if self.redis else StoreQuotaState(self.store)
            ),
        )
        self.gateway.accepting.clear()  # until interrupted turns are queued (see `_start`)
        self.web_server = web_server
        self.port: int | None = None
        self._runner: web.AppRunner | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self.channel_states = ChannelStates()  # for /healthz and /readyz
        self.readiness = self.ops.readiness  # `add(name, check)`: more dependencies to watch
        self.ops.watch(
            store=self.store,
            channels=self.channels,
            states=self.channel_states,
            workers=self.workers,
            conversations=self.conversations,
        )
        if self.redis is not None:  # no message can be taken while it is unreachable
            self.readiness.add("redis", self.redis.ready)

    def _persona_name(self) -> str:
        """The agent id of the conversations' sessions (the gateway's persona)."""
        return self.personas.get(self.gateway.settings.persona).name

    async def _answered(self, conversation_key: str) -> bool:
        """Whether a turn was answered in this conversation (a Slack thread, say), durably."""
        try:
            return await self.store.conversation_chat(conversation_key) is not None
        except StorageError as exc:
            log.warning("cannot tell whether %s was answered before: %s", conversation_key, exc)
            return False

    async def _latest_conversation(self, channel: str, key_prefix: str, user: str) -> str | None:
        """The conversation under `key_prefix` with the user's newest turn (a Slack thread)."""
        try:
            return await self.store.latest_conversation(
                channel=channel, key_prefix=key_prefix, user_id=user
            )
        except StorageError as exc:
            log.warning("cannot find the latest conversation under %s: %s", key_prefix, exc)
            return None

    def _path(self, value: str) -> Path:
        path = Path(value)
        return path if path.is_absolute() or value == ":memory:" else self.base_dir / path

    @property
    def url(self) -> str:
        return f"http://{self.config.server.host}:{self.port}"

    async def __aenter__(self) -> App:
        try:
            await self._start()
        except BaseException:
            await self.stop()  # nothing half-open stays behind (the port, the store, sessions)
            raise
        return self

    async def _start(self) -> None:
        try:
            await self.store.open()
        except StorageError as exc:  # one line at the CLI, like a bad value
            if self.config.storage.url:
                raise ConfigError(
                    f"storage.url: {exc}; is the server up, and do the url's user, host, port"
                    " and database exist?"
                ) from exc
            raise ConfigError(
                f"storage.path: {exc}; it must be a SQLite file (or a new one) in a folder this"
                " user can write, on a disk with room"
            ) from exc
        await self.knowledge.open()  # logs what it indexed
        if self.redis is not None:
            await self.redis.open()
        # tools keep their own shorter deadlines; this one only bounds a forgotten request
        self.http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
        self.coordinator.services["http"] = self.http
        for error in self.personas.load():
            log.error("%s", error)
        self._supervisor = asyncio.create_task(self._supervise(), name="app")
        started = asyncio.create_task(self.conversations.started.wait())
        await asyncio.wait({started, self._supervisor}, return_when=asyncio.FIRST_COMPLETED)
        if not started.done():
            started.cancel()
            raise RuntimeError("the gateway failed to start; see the log")
        # Embedded mode: this process owns the database, so a running turn is a dead process's.
        # With Redis, other processes' turns run too: a dead one's is taken over (and resumed)
        # through the queue, whose lease says it is dead; at start only embedded mode sweeps.
        if self.redis is None:
            await recover_interrupted_turns(
                self.store, self.channels, self.gateway, close_orphans=self.web_server
            )
        self.gateway.accepting.set()
        if self.web_server:
            await self._start_web()
        log.info("model: %s", describe_provider(self.provider))
        if self.port is not None:
            log.info("serving %s  (web widget demo at /, health at /healthz)", self.url)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def stop(self) -> None:
        try:
            if self._runner is not None:
                await self._runner.cleanup()  # closes web sockets with 1001 before the tasks go
                self._runner = None
            if self._supervisor is not None:
                self._supervisor.cancel()
                try:
                    await self._supervisor
                except asyncio.CancelledError:
                    if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                        raise  # after the resources below are closed
                except Exception:
                    log.exception("a part of the gateway crashed")
                finally:
                    self._supervisor = None
        finally:
            await self._close_resources()

    async def _close_resources(self) -> None:
        if self.http is not None:
            await self.http.close()
            self.http = None
        await self.knowledge.close()
        for channel in self.channels.values():  # after the turns: their last edits use these
            close_channel = getattr(channel, "aclose", None)
            if close_channel is not None:
                await close_channel()
        close_provider = getattr(self.provider, "aclose", None)
        if self._own_provider and close_provider is not None:
            await close_provider()  # the SDKs' HTTP connection pools
        if self.redis is not None:
            await self.redis.close()
        await self.store.close()

    async def wait(self) -> None:
        """Until the app stops (or one of its parts crashes, which stops it)."""
        if self._supervisor is not None:
            await self._supervisor

    async def _supervise(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self.gateway.run(), name="gateway")
            group.create_task(self.workers.run(), name="workers")
            group.create_task(self.personas.watch(), name="personas")
            group.create_task(self.knowledge.watch(), name="knowledge")
            for channel in self.channels.values():
                group.create_task(self._keep_running(channel), name=f"channel:{channel.name}")
            if self.web_server:
                group.create_task(self._announce(), name="readiness")

    async def _announce(self) -> None:
        """Once the channels have had time to start: what /readyz says, in the log."""
        await asyncio.sleep(self.channel_states.settle_s + 0.5)
        await self.ops.announce()

    async def _keep_running(self, channel: Channel) -> None:
        """Run a channel; if it crashes, log and restart it with backoff: other channels go on."""
        backoff = 1.0
        states = self.channel_states
        while True:
            started = asyncio.get_running_loop().time()
            states.started(channel.name)
            try:
                await channel.run(self.gateway.handle)
                states.stopped(channel.name)
                return  # the channel finished (say, stdin ended)
            except ChannelRevoked as exc:  # retrying cannot help: one line, and it stays off
                states.failed(channel.name, str(exc))
                log.error(
                    "channel %s stopped until restarted with new credentials: %s", channel.name, exc
                )
                return
            except ChannelError as exc:  # the platform said no (a bad token, say): no traceback
                states.failed(channel.name, str(exc))
                log.error("channel %s stopped: %s; retrying in %.0f s", channel.name, exc, backoff)
            except Exception as exc:
                states.failed(channel.name, f"crashed: {type(exc).__name__}: {exc}")
                log.exception("channel %s crashed; restarting in %.0f s", channel.name, backoff)
            if asyncio.get_running_loop().time() - started > 60:
                backoff = 1.0  # it ran fine for a while: this is a new problem
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 60.0)

    async def _start_web(self) -> None:
        app = web.Application()
        app[READY] = {"ready": False}
        app.router.add_get("/healthz", self._healthz)
        self.ops.install(app)  # /readyz, /metrics
        for channel in self.channels.values():
            if isinstance(channel, WebRoutes):
                channel.install(app)
        if self.config.admin.token:
            self._admin().install(app)
        self._runner = web.AppRunner(
            app,
            shutdown_timeout=5,
            handle_signals=False,
            keepalive_timeout=KEEPALIVE_S,  # a silent TCP connection is closed, not kept an hour
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.config.server.host, self.config.server.port)
        await site.start()
        self.port = self._runner.addresses[0][1]
        app[READY]["ready"] = True

    def _admin(self) -> AdminView:
        sources = AdminSources(
            store=self.store,
            personas=self.personas,
            channel_states=self.channel_states,
            channels=lambda: sorted(self.channels),
            prices=self.config.usage.prices,
        )
        return AdminView(self.config.admin, sources)

    async def _healthz(self, request: web.Request) -> web.Response:
        ready = request.app[READY]["ready"]
        failed = self.channel_states.any_failed  # an enabled channel that cannot run: not healthy
        body: dict[str, Any] = {
            "status": "failing" if failed else "ok" if ready else "starting",
            "model": self.provider.name,
            "channels": self.channel_states.report(),
        }
        for channel in self.channels.values():
            if isinstance(channel, HealthReport):
                body |= channel.health()
        trouble = self.store.trouble  # the last store call failed: turns cannot be kept
        if trouble is not None:
            body |= {"status": "error", "storage": trouble}
        redis_down = False
        if self.redis is not None:  # messages cannot be taken while it is down
            body |= await self.redis.health.report()
            redis_down = not self.redis.health.up
            if redis_down:
                body["status"] = "error"
        healthy = ready and not failed and trouble is None and not redis_down
        return web.json_response(body, status=200 if healthy else 503)
