"""The running gateway: owns its parts, starts them in order, supervises them, stops them cleanly.

What the parts are and which of them Redis shares is decided in `bot/runtime/wiring.py`; the HTTP side
(/healthz, the channels' routes, admin) is `bot/runtime/web_server.py`. Here: the order things open in,
the task group that runs them, a crashed channel restarted, and everything closed on the way out.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from adapters.base import Channel, ChannelError, ChannelRevoked, PlatformStatus
from adapters.registry import build_enabled
from agent.personas import PersonaLibrary
from agent.providers import build_choices, build_provider, describe_provider
from agent.providers.base import Provider
from bot.approvals.desk import DeskAnswers
from bot.handoff.build import build_handoff, handoff_commands, operates
from bot.media.build import build_blobs, build_links, keep_retention, upload_secret
from bot.media.route import MediaRoute
from bot.ops.admin.pairing import PairingDesk
from bot.ops.health import ChannelStates
from bot.ops.mcp_status import watch_mcp
from bot.ops.operations import Operations, metrics_enabled
from bot.pipeline.background import BackgroundResults
from bot.pipeline.conversations import ConversationQueue
from bot.pipeline.gateway import Gateway
from bot.pipeline.pairing import PairingNotices
from bot.pipeline.quota import Quotas
from bot.pipeline.recovery import recover_interrupted_turns
from bot.runtime import chat_wiring, people_wiring, scheduling, wiring
from bot.runtime.config import Config, ConfigError
from bot.runtime.tool_wiring import build_tools
from bot.runtime.web_server import WebServer
from bot.storage import StorageError
from bot.storage.backends import build_store
from tools.registry import ToolRegistry

log = logging.getLogger(__name__)


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
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`metrics`: count for /metrics (None: unless the environment says BOT_METRICS=off);
        `clock`: what the channels' inbound rate limits count time by (a test's own clock)."""
        self.config = config
        self.base_dir = base_dir or Path.cwd()
        self.ops = Operations(metrics=metrics_enabled() if metrics is None else metrics)
        self._own_provider = provider is None  # a provider handed in is closed by its owner
        self.provider = provider or build_provider(config.llm)
        tools = build_tools(config, registry, self.base_dir, self._path)
        self.registry, self.knowledge, self.http, self.mcp = tools
        served = self.ops.meter(self.provider, self.registry)  # what the agent calls
        # the models a conversation may switch to (`llm.choices`), measured the same way
        self.models = {
            name: self.ops.meter(model, self.registry)
            for name, model in build_choices(config.llm).items()
        }
        self.store = build_store(self._path(config.storage.path), config.storage.url)
        self.media_dir = self._path(config.media.dir)
        self.blobs = build_blobs(
            config.media, self.media_dir, self.store, on_postgresql=bool(config.storage.url)
        )
        # signed links serve blobs from the web server only; `bot chat` makes no secret file
        self.links = build_links(config.media, self.media_dir) if web_server else None
        uploads = upload_secret(config.media, self.media_dir) if web_server else None
        self.personas = PersonaLibrary(
            [self._path(d) for d in config.personas.dirs], known_tools=self.registry.names
        )
        self.channels: dict[str, Channel] = {c.name: c for c in channels or []}
        # A /stop asked on any process stops the specialists running on this one. Late-bound,
        # a genuine cycle: the workers, built below, stop a task elsewhere through this queue.
        self.redis = wiring.redis_mode(
            config,
            web_server=web_server,
            stopped=lambda key: self.workers.stop_conversation(key),
            task_stopped=lambda key, task_id: self.workers.stop_task(key, task_id),
        )
        self.alone = self.redis is None and web_server  # writes its conversations alone
        if self.alone:  # (bot chat, beside a serving bot, writes only its own)
            self.store.write_alone()
        access = wiring.access_rules(config)
        # `bot chat` (no web server) runs none: a polling channel would steal a serving bot's updates
        if web_server:
            services = wiring.channel_services(
                config,
                self.store,
                self.ops,
                self.redis,
                admits=lambda m: access.check(m) == "allow" or operates(self.handoff, m),
                # the agent id of the conversations' sessions (the gateway's persona)
                persona_name=lambda: self.personas.get(persona).name,
                introduction=lambda: wiring.introduction(self.personas.get(persona)),
                data_dir=None
                if config.storage.path == ":memory:"
                else self._path(config.storage.path).parent,
                media=(self.blobs, self.links, uploads),
                clock=clock,
            )
            for channel in build_enabled(config.channels, services):
                self.channels[channel.name] = channel
        self.conversations: ConversationQueue
        self.conversations, dedup = wiring.conversation_seams(config, self.store, self.redis)
        self.background = BackgroundResults(self.store, dedup, self.conversations)
        self.workers = wiring.build_workers(
            config,
            served,
            self.registry,
            self.store,
            self.personas,
            self.redis,
            deliver=self.background.deliver,
        )
        states = wiring.conversation_states(self.store, self.redis, alone=self.alone)
        persona_choice = wiring.persona_choice(config, persona)
        self.handoff = build_handoff(config, self.store, states, self.channels, dedup,  # a person
                                     self.personas, persona_choice, self.redis)  # fmt: skip
        self.schedules = scheduling.scheduling(  # tasks enter the gateway as messages
            config, self.store, states, self.channels, inbox=lambda m: self.gateway.handle(m),
            access=access, serving=web_server,
        )  # fmt: skip
        deps = wiring.tool_deps(config, self.http, self.knowledge, self.workers, self.blobs,
                                self.schedules.desk, self.handoff)  # fmt: skip
        gate, self.approvals = people_wiring.approvals(
            config, self.store, self.channels, self.registry, states, serving=web_server
        )
        self.coordinator = wiring.build_coordinator(
            config, served, self.registry, self.store, self.personas, deps, gate
        )
        # voice notes' speech to text
        self.hearing = wiring.hearing(config, self.blobs, self.ops.speech)
        self.quota_state = wiring.quota_state(self.store, self.redis)
        quotas = Quotas(config.quotas, self.quota_state, observer=self.ops.metrics)
        self.choices = chat_wiring.chat_choices(
            config, states, quotas, persona_choice, self.personas, self.models, self.provider.model
        )
        self.pairing = people_wiring.pairing_settings(config)  # codes for unknown senders
        self.pairing_notices = PairingNotices(self.store, self.channels)
        self.gateway = Gateway(
            channels=self.channels,
            coordinator=self.coordinator,
            turn_log=self.store,
            message_log=self.store,
            personas=self.personas,
            dedup=dedup,
            conversations=self.conversations,
            settings=wiring.gateway_settings(config, persona_choice),
            access=access,
            workers=self.workers,
            metrics=self.ops.gateway_metrics,
            quotas=quotas,
            states=states,
            commands=[
                *chat_wiring.chat_commands(config, self.choices, self.personas, self.store),
                *self.schedules.commands,
                *handoff_commands(self.handoff, self.conversations, self.channels, self.workers),
            ],
            blobs=self.blobs,
            hearing=self.hearing,
            pairing=people_wiring.pairing_gate(
                config, self.channels, self.store, self.pairing_notices, serving=web_server
            ),
            approvals=self.approvals,
            choices=self.choices,
            handoff=self.handoff,
        )
        self.gateway.accepting.clear()  # until interrupted turns are queued (see `_start`)
        self.web_server = web_server
        self.port: int | None = None
        self._web: WebServer | None = None
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
        watch_mcp(self.readiness, self.mcp)

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
        await self.http.open()
        self.personas.load()  # logs each broken file, saying what serves instead
        wiring.check_personas(self.gateway.settings.persona, self.personas)
        chat_wiring.check_switchable(self.config, self.personas)
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
                turn_log=self.store,
                message_log=self.store,
                channels=self.channels,
                gateway=self.gateway,
                deliver=self.background.deliver,
                close_orphans=self.web_server,
            )
        self.gateway.accepting.set()
        if self.web_server:
            self._web = WebServer(
                self.config,
                provider=self.provider,
                store=self.store,
                personas=self.personas,
                channels=self.channels,
                channel_states=self.channel_states,
                ops=self.ops,
                redis=self.redis,
                media=MediaRoute(self.blobs, self.links) if self.links is not None else None,
                tool_servers=self.mcp.states,
                pairing=PairingDesk(self.store, self.pairing, self.pairing_notices.wake),
                approvals=DeskAnswers(self.approvals, self.gateway.queue_resume),
                handoff=None if self.handoff is None else self.handoff.desk,
            )
            self.port = await self._web.start()
        log.info("model: %s", describe_provider(self.provider))
        log.info("voice notes: %s", self.hearing.describe())
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
            if self._web is not None:
                await self._web.stop()  # closes web sockets with 1001 before the tasks go
                self._web = None
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
        await self.http.close()
        await self.knowledge.close()
        for channel in self.channels.values():  # after the turns: their last edits use these
            close_channel = getattr(channel, "aclose", None)
            if close_channel is not None:
                await close_channel()
        # the SDKs' HTTP connection pools
        owned = [self.provider] if self._own_provider else []  # a handed-in one: its owner's
        for model in [*owned, *self.models.values()]:
            close_provider = getattr(model, "aclose", None)
            if close_provider is not None:
                await close_provider()
        await self.hearing.aclose()
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
            group.create_task(self.mcp.run(), name="mcp")  # the stdio children close with it
            if self.handoff is not None and self.web_server:  # queue timeouts, restarts included
                group.create_task(self.handoff.desk.run(), name="handoff-timeouts")
            if self.web_server:  # `bot chat` shares a serving bot's folder: that one purges
                retention = keep_retention(self.blobs, self.config.media.retention_days)
                group.create_task(retention, name="media-retention")
            if self.web_server and people_wiring.pairs(
                self.config
            ):  # approvals told by serving processes
                group.create_task(self.pairing_notices.run(), name="pairing-notices")
            for channel in self.channels.values():
                group.create_task(self._keep_running(channel), name=f"channel:{channel.name}")
            group.create_task(self.schedules.run(self.gateway.accepting), name="schedules")
            if self.web_server:
                group.create_task(self._announce(), name="readiness")
                watch = chat_wiring.cost_watch(
                    self.config, self.store, self.models, self.quota_state, self.ops.metrics
                )
                if watch is not None:
                    group.create_task(watch.run(), name="cost-alert")

    async def channels_started(self) -> None:
        """Until every channel has connected or failed (or had its time to: `settle_s`)."""
        waited, step = 0.0, 0.05
        while self.channel_states.any_starting and waited < self.channel_states.settle_s + 0.5:
            await asyncio.sleep(step)
            waited += step

    async def _announce(self) -> None:
        """What /readyz says, in the log, once the channels have started."""
        await self.channels_started()
        await self.ops.announce()

    async def _keep_running(self, channel: Channel) -> None:
        """Run a channel; if it crashes, log and restart it with backoff: other channels go on."""
        backoff = 1.0
        states = self.channel_states
        while True:
            started = asyncio.get_running_loop().time()
            states.started(
                channel.name,
                channel.platform_down if isinstance(channel, PlatformStatus) else None,
            )
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
