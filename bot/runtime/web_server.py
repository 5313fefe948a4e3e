"""The app's HTTP server: /healthz, the ops routes, the channels' own routes and the admin pages.

One aiohttp server carries them all; this module decides what is installed on it and what
/healthz says, so that `bot/runtime/app.py` only starts and stops it with the rest of the gateway.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from aiohttp import web

from adapters.base import Channel, HealthReport, WebRoutes
from agent.personas import PersonaLibrary
from agent.providers.base import Provider
from bot.media.route import MediaRoute
from bot.ops.admin import AdminSources, AdminView
from bot.ops.health import ChannelStates
from bot.ops.operations import Operations
from bot.runtime.config import Config
from bot.storage.backends import AnyStore
from tools.mcp.state import ServerState

if TYPE_CHECKING:  # redis is imported only where redis.url is set (bot/runtime/wiring.py)
    from bot.redis.mode import RedisMode

READY = web.AppKey("ready", dict)
KEEPALIVE_S = 75.0  # aiohttp's default is 3,630 s


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
    ) -> None:
        """`tool_servers`: the MCP servers' states, for the admin view."""
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
        self._runner: web.AppRunner | None = None

    async def start(self) -> int:
        app = web.Application()
        app[READY] = {"ready": False}
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
            keepalive_timeout=KEEPALIVE_S,  # a silent TCP connection is closed, not kept an hour
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.config.server.host, self.config.server.port)
        await site.start()
        port: int = self._runner.addresses[0][1]
        app[READY]["ready"] = True
        return port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()  # closes web sockets with 1001 before the tasks go
            self._runner = None

    def _admin(self) -> AdminView:
        sources = AdminSources(
            store=self.store,
            personas=self.personas,
            channel_states=self.channel_states,
            channels=lambda: sorted(self.channels),
            prices=self.config.usage.prices,
            tool_servers=self.tool_servers,
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
