"""The app's HTTP server: /livez, /healthz, ops routes, the channels' own routes, admin pages.

One aiohttp server carries them all; this module decides what is installed on it and what
/healthz says, so that `bot/runtime/app.py` only starts and stops it with the rest of the gateway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from aiohttp import web

from adapters.base import Channel, HealthReport, WebRoutes
from agent.personas import PersonaLibrary
from agent.providers.base import Provider
from bot.handoff.desk import HandoffDesk
from bot.media.route import MediaRoute
from bot.ops.admin import AdminSources, AdminView
from bot.ops.admin.approvals import ApprovalConsole
from bot.ops.admin.pairing import PairingDesk
from bot.ops.health import ChannelStates
from bot.ops.operations import Operations
from bot.ops.readiness import Down
from bot.runtime.config import Config
from bot.runtime.config.choices import model_prices
from bot.runtime.listener import CappedListener, default_max_connections
from bot.storage.backends import AnyStore
from tools.mcp.state import ServerState

if TYPE_CHECKING:  # redis is imported only where redis.url is set (bot/runtime/wiring.py)
    from bot.redis.mode import RedisMode

READY = web.AppKey("ready", dict)
PROBE_EVERY_S = 1.0  # /healthz starts a storage probe write at most this often
PROBE_WAIT_S = 2.0  # how long /healthz waits for a probe after one failed
PROBE_TIMEOUT_S = 30.0  # past every store's own deadlines (a lock: 5 s, PostgreSQL: 10 s)


class WebServer:
    """Serves the routes on `server.host`/`server.port`; `start` returns the port it listens on."""

    def __init__(
        self,
        config: Config,
        *,
        provider: Provider,
        store: AnyStore,
        personas: PersonaLibrary,
        channels: Mapping[str, Channel],
        channel_states: ChannelStates,
        ops: Operations,
        redis: RedisMode | None,
        media: MediaRoute | None = None,
        tool_servers: Callable[[], Mapping[str, ServerState]] = dict,
        approvals: ApprovalConsole | None = None,
        pairing: PairingDesk | None = None,
        handoff: HandoffDesk | None = None,
    ) -> None:
        """`tool_servers`: the MCP servers' states, for the admin view; `pairing`: its
        pairing section; `approvals`: the requests waiting for a yes; `handoff`: what its
        operators act through (None: no handoff pages)."""
        self.approvals = approvals
        self.handoff = handoff
        self.config = config
        self.provider = provider
        self.store = store
        self.personas = personas
        self.channels = channels
        self.channel_states = channel_states
        self.ops = ops
        self.redis = redis
        self.media = media  # /media/<blob id>: signed links to stored files
        self.tool_servers = tool_servers
        self.pairing = pairing
        self._runner: web.AppRunner | None = None
        self._listener: CappedListener | None = None
        self._probe: asyncio.Task[None] | None = None  # /healthz's storage write, in flight
        self._storage_seen: str | None = None  # why the last one failed; None: it did not
        self._next_probe = 0.0  # loop time

    async def start(self) -> int:
        app = web.Application()
        app[READY] = {"ready": False}
        app.router.add_get("/livez", self._livez)
        app.router.add_get("/healthz", self._healthz)
        self.ops.install(app)  # /readyz, /metrics
        if self.media is not None:
            self.media.install(app)
        for channel in self.channels.values():
            if isinstance(channel, WebRoutes):
                channel.install(app)
        if self.config.admin.token:
            self._admin().install(app)
        self._runner = web.AppRunner(
            app,
            shutdown_timeout=5,
            handle_signals=False,
            # aiohttp arms this timer when a connection opens and after each answer, and only
            # a whole request head stops it: an idle keep-alive connection, one that never
            # sends a request and a slow header writer (slowloris) are all closed by it
            keepalive_timeout=self.config.server.idle_timeout_s,
        )
        await self._runner.setup()
        assert self._runner.server is not None
        cap = self.config.server.max_connections or default_max_connections()
        self._listener = CappedListener(self._runner.server, cap)
        port = await self._listener.open(self.config.server.host, self.config.server.port)
        app[READY]["ready"] = True
        return port

    async def stop(self) -> None:
        if self._listener is not None:
            self._listener.close()  # no new connections; the runner ends the open ones
            self._listener = None
        if self._runner is not None:
            await self._runner.cleanup()  # closes web sockets with 1001 before the tasks go
            self._runner = None
        if self._probe is not None:
            self._probe.cancel()
            await asyncio.wait({self._probe})  # its end, not its CancelledError: ours stays ours
            self._probe = None

    def _admin(self) -> AdminView:
        sources = AdminSources(
            store=self.store,
            personas=self.personas,
            channel_states=self.channel_states,
            channels=lambda: sorted(self.channels),
            prices=model_prices(self.config),  # `usage.prices` and each choice's `price`
            tool_servers=self.tool_servers,
            pairing=self.pairing,
            approvals=self.approvals,
            schedules=self.store,
            handoff=self.handoff,
        )
        return AdminView(self.config.admin, sources)

    async def _probe_storage(self) -> str | None:
        """Why the newest finished probe write failed (None: it did not); a new probe starts
        unless one runs. While the last one succeeded the answer does not wait for the new
        one: another process holding the lock makes a write wait (up to its busy deadline),
        which is not a failure, and /healthz must not wait too. Once one failed, the answer
        waits for the next (bounded), so a recovery shows at once."""
        failing = self._storage_seen is not None
        now = asyncio.get_running_loop().time()
        idle = self._probe is None or self._probe.done()
        if idle and (failing or now >= self._next_probe):
            self._next_probe = now + PROBE_EVERY_S  # a flood of /healthz is no flood of writes
            self._probe = asyncio.create_task(self._probe_once(), name="healthz-storage")
        if failing and self._probe is not None:
            await asyncio.wait({self._probe}, timeout=PROBE_WAIT_S)  # not cancelled at the end
        return self._storage_seen

    async def _probe_once(self) -> None:
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_S):
                down = await self.ops.storage_down()
        except TimeoutError:
            down = Down(f"a write took over {PROBE_TIMEOUT_S:g} s")
        except Exception as exc:  # not a storage fault: reported all the same, never lost
            down = Down(f"the probe failed: {type(exc).__name__}: {exc}")
        self._storage_seen = None if down is None else down.reason

    async def _livez(self, request: web.Request) -> web.Response:
        """Liveness: the loop runs and serves. Nothing else: an orchestrator that restarts the
        gateway on a storage or Redis outage gains nothing and walks into the window in which
        a killed turn's answer may be sent twice (README: Liveness and readiness)."""
        return web.json_response({"status": "alive"})

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
        # the last store call failed, or the newest probe write did: turns cannot be kept
        probed = await self._probe_storage()  # first: its write clears a stale `trouble`
        trouble = self.store.trouble or probed
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
