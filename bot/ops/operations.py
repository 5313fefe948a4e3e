"""What the operator sees of one app: `/metrics`, `/readyz`, and the readiness line at start.

`Operations` owns the app's `Metrics` (None when `BOT_METRICS=off`), its `Readiness` with the
built-in checks (storage writable, each enabled channel started, the model answering) and the
routes. bot/runtime/app.py builds it first and hands its seams to the parts.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, nullcontext

from aiohttp import web

from adapters.base import Channel, HealthReport
from adapters.platform_calls import NO_PLATFORM_CALLS, PlatformCalls
from agent.providers.base import Provider
from agent.providers.metered import ModelCall, ModelObserver
from agent.providers.metering import meter
from agent.workers import Workers
from bot.ops.gc_pauses import watched
from bot.ops.health import ChannelStates
from bot.ops.metrics import CONTENT_TYPE, NO_METRICS, GatewayMetrics, Metrics
from bot.ops.readiness import Check, Down, ModelWatch, Readiness
from bot.pipeline.conversations import ConversationQueue
from bot.pipeline.turn_line import TALLIES
from bot.speech.base import UNOBSERVED, SpeechObserver
from bot.storage.base import StorageError
from bot.storage.roles import ClaimRecords
from tools.registry import ToolRegistry

log = logging.getLogger(__name__)


def metrics_enabled(env: Mapping[str, str] | None = None) -> bool:
    """`BOT_METRICS=off` switches the counters off (to measure what they cost)."""
    value = (os.environ if env is None else env).get("BOT_METRICS", "on")
    return value.strip().lower() not in ("off", "0", "false", "no")


class Operations:
    def __init__(self, *, metrics: bool = True) -> None:
        self.metrics = Metrics() if metrics else None
        self.readiness = Readiness()
        self.model = ModelWatch()
        self._storage: Check | None = None

    @property
    def gateway_metrics(self) -> GatewayMetrics:
        return self.metrics or NO_METRICS

    def collections_watched(self) -> AbstractContextManager[None]:
        """Each cyclic collection's pause in /metrics while inside: for a serving process only
        (`bot serve`; bot/ops/gc_pauses.py says why)."""
        return nullcontext() if self.metrics is None else watched(self.metrics.collection_paused)

    @property
    def speech(self) -> SpeechObserver:
        return self.metrics or UNOBSERVED

    @property
    def platform_calls(self) -> PlatformCalls:
        return self.metrics or NO_PLATFORM_CALLS

    def meter(self, provider: Provider, registry: ToolRegistry) -> Provider:
        """The provider the agent should call: every call measured (metrics and readiness)."""
        if self.metrics is not None:
            registry.observer = self.metrics.tool_call
        observers: list[ModelObserver] = [self.model, TALLIES]  # TALLIES: the turn's log line
        if self.metrics is not None:
            observers.append(self.metrics)
        return meter(provider, _Fanout(observers))

    def watch(
        self,
        *,
        store: ClaimRecords,
        channels: Mapping[str, Channel],
        states: ChannelStates,
        workers: Workers,
        conversations: ConversationQueue,
    ) -> None:
        """Register the built-in readiness checks and the scrape-time gauges."""
        self._storage = _storage_check(store)
        self.readiness.add("storage", self._storage)
        for name in channels:
            self.readiness.add(f"channel:{name}", _channel_check(states, name))
        self.readiness.add("model", self.model.check)
        if self.metrics is None:
            return
        waiting = getattr(conversations, "waiting", None)  # a networked queue may not count

        def read() -> Iterator[tuple[str, dict[str, str], float]]:
            running = sum(1 for t in workers.tasks.values() if t.status == "running")
            yield "gateway_specialists_running", {}, running
            if waiting is not None:
                yield "gateway_conversations_waiting", {}, waiting()
            for name, channel in channels.items():
                if isinstance(channel, HealthReport):
                    open_now = channel.health().get("connections")
                    if isinstance(open_now, int):
                        yield "gateway_connections", {"channel": name}, open_now

        self.metrics.gauges(
            read,
            gateway_specialists_running="Specialist tasks running or waiting for a slot",
            gateway_conversations_waiting="Conversations with messages queued for a turn",
            gateway_connections="Open client connections (web socket)",
        )

    async def storage_down(self) -> Down | None:
        """Can storage be written? The probe `/readyz` makes (a real write; requests that
        arrive while one runs share its answer), unbounded: a held lock makes it wait."""
        return None if self._storage is None else await self._storage()

    def install(self, app: web.Application) -> None:
        app.router.add_get("/readyz", self._readyz)
        if self.metrics is not None:
            app.router.add_get("/metrics", self._metrics)

    async def announce(self) -> None:
        """The readiness report, once, in the log (`bot serve` at start)."""
        ready, body = await self.readiness.report()
        if ready:
            log.info("ready: storage writable, channels started, model answering")
            return
        for name, down in body["down"].items():
            log.warning("not ready: %s: %s (since %s)", name, down["reason"], down["since"])

    async def _readyz(self, request: web.Request) -> web.Response:
        ready, body = await self.readiness.report()
        return web.json_response(body, status=200 if ready else 503)

    async def _metrics(self, request: web.Request) -> web.Response:
        assert self.metrics is not None
        return web.Response(body=self.metrics.render(), headers={"Content-Type": CONTENT_TYPE})


def _storage_check(store: ClaimRecords) -> Check:
    # /readyz needs no credentials: a flood of it must not become a flood of writes, so the
    # requests that arrive while a probe runs take its answer instead of writing again.
    lock = asyncio.Lock()
    probes = 0  # finished so far: a waiter that sees it grow takes the newest answer
    last: Down | None = None

    async def probe() -> Down | None:
        # a real write, as a turn would make: a read-only file or a full disk fails it
        name = f"readyz:{uuid.uuid4().hex}"
        try:
            await store.claim_event(name, 60)
            await store.release_event(name)
        except StorageError as exc:
            return Down(f"not writable: {exc}")
        return None

    async def check() -> Down | None:
        nonlocal probes, last
        seen = probes
        async with lock:
            if probes > seen:  # a probe finished while this request waited
                return last
            last = await probe()
            probes += 1
            return last

    return check


def _channel_check(states: ChannelStates, name: str) -> Check:
    async def check() -> Down | None:
        down = states.down(name)
        return None if down is None else Down(*down)

    return check


class _Fanout:
    def __init__(self, observers: list[ModelObserver]) -> None:
        self.observers = observers

    def model_call(self, call: ModelCall) -> None:
        for observer in self.observers:
            observer.model_call(call)

    def model_retry(self, provider: str, model: str) -> None:
        for observer in self.observers:
            observer.model_retry(provider, model)

    def model_fallback(self, from_provider: str, to_provider: str) -> None:
        for observer in self.observers:
            observer.model_fallback(from_provider, to_provider)
