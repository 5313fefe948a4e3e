"""`GET /metrics`: the gateway's counters and histograms in Prometheus text format.

One `Metrics` per app, with a registry of its own (never prometheus-client's global one), so
two apps in one process (tests) count apart. The parts report through small seams, not through
prometheus: the turn runner and the gateway (`GatewayMetrics`, below), the model providers
(`ModelObserver`, agent/providers/metered.py), the tool registry (`ToolObserver`), each channel
(`PlatformCalls`, adapters/platform_calls.py), speech to text (`SpeechObserver`,
bot/speech/base.py). Gauges (specialists running, conversations
waiting, open connections) are read when scraped, never kept up to date on the hot path.

Labels are bounded: channel, outcome, provider, model (from config), tool (registered names;
any other name is "unknown"), platform method. Never a user, chat or conversation id.
`NO_METRICS` switches all of it off (`BOT_METRICS=off`, for the overhead benchmark).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, Protocol, TypeVar

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from adapters.platform_calls import Outcome
from agent.providers.metered import ModelCall
from bot.ops import gc_pauses
from bot.speech.base import SpeechOutcome
from tools.registry import ToolOutcome

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
FAST = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
SLOW = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class GatewayMetrics(Protocol):
    """What the gateway and the turn runner report."""

    def dedup_hit(self, channel: str) -> None: ...

    def placeholder_shown(self, channel: str, seconds: float) -> None: ...

    def turn_finished(self, channel: str, outcome: str, seconds: float) -> None: ...


class _Off:
    """Counts nothing (every seam's no-op)."""

    def dedup_hit(self, channel: str) -> None:
        pass

    def placeholder_shown(self, channel: str, seconds: float) -> None:
        pass

    def turn_finished(self, channel: str, outcome: str, seconds: float) -> None:
        pass


NO_METRICS: Final[GatewayMetrics] = _Off()

Gauges = Callable[[], Iterable[tuple[str, dict[str, str], float]]]
M = TypeVar("M", Counter, Histogram)


class Metrics:
    """Every metric of one app; implements each part's reporting seam."""

    def __init__(self) -> None:
        # labelled children by (metric, labels): `labels()` costs more than the count itself
        self._children: dict[tuple[Any, tuple[str, ...]], Any] = {}
        # No `*_created` series: a second series per counter and histogram child, holding only
        # its start time, which no dashboard uses (a process-wide switch of prometheus-client).
        disable_created_metrics()  # type: ignore[no-untyped-call]
        r = self.registry = CollectorRegistry()
        # process_cpu_seconds_total, process_resident_memory_bytes, open fds, start time...
        ProcessCollector(registry=r)
        ch = ["channel"]
        pm = ["provider", "model"]
        self.turns = Counter("gateway_turns", "Turns finished", [*ch, "outcome"], registry=r)
        self.placeholder_seconds = Histogram(
            "gateway_time_to_placeholder_seconds",
            "From the message's arrival to its placeholder shown",
            ch,
            buckets=FAST,
            registry=r,
        )
        self.turn_seconds = Histogram(
            "gateway_turn_seconds",
            "From the message's arrival to the turn's final edit",
            [*ch, "outcome"],
            buckets=SLOW,
            registry=r,
        )
        self.dedup_hits = Counter(
            "gateway_dedup_hits", "Platform events dropped as duplicates", ch, registry=r
        )
        self.model_calls = Counter(
            "gateway_model_calls", "Model calls (each retry is one)", [*pm, "outcome"], registry=r
        )
        self.model_seconds = Histogram(
            "gateway_model_call_seconds", "Model call duration", pm, buckets=SLOW, registry=r
        )
        self.model_first_token = Histogram(
            "gateway_model_first_token_seconds",
            "From a model call's start to its first text or tool call",
            pm,
            buckets=SLOW,
            registry=r,
        )
        self.model_tokens = Counter(
            "gateway_model_tokens", "Tokens the models reported", [*pm, "direction"], registry=r
        )
        self.model_retries = Counter(
            "gateway_model_retries", "Model calls retried on the same provider", pm, registry=r
        )
        self.model_fallbacks = Counter(
            "gateway_model_fallbacks",
            "Model calls passed on to the next provider of the chain",
            ["from_provider", "to_provider"],
            registry=r,
        )
        self.tool_calls = Counter(
            "gateway_tool_calls", "Tool calls", ["tool", "outcome"], registry=r
        )
        self.soft_limits = Counter(
            "gateway_quota_soft_crossed",
            "Quota scopes (user, conversation, address, key) that crossed their soft limit",
            ["scope"],
            registry=r,
        )
        self.cost_today = Gauge("gateway_cost_today", "Spend today so far (UTC)", registry=r)
        self.cost_median = Gauge(
            "gateway_cost_median_7d", "Median daily spend of the 7 days before today", registry=r
        )
        self.cost_anomaly = Gauge(
            "gateway_cost_anomaly",
            "1 while today's spend is over quotas.cost_alert_factor times the 7-day median",
            registry=r,
        )
        self.tool_seconds = Histogram(
            "gateway_tool_call_seconds", "Tool call duration", ["tool"], buckets=SLOW, registry=r
        )
        # an MCP server's calls, whatever the tool: `server` is a configured name (bounded)
        self.mcp_calls = Counter(
            "gateway_mcp_calls", "Calls to an MCP server's tools", ["server", "outcome"], registry=r
        )
        self.mcp_seconds = Histogram(
            "gateway_mcp_call_seconds",
            "MCP tool call duration",
            ["server"],
            buckets=SLOW,
            registry=r,
        )
        self.platform_calls = Counter(
            "gateway_platform_calls",
            "Calls to a chat platform's API",
            [*ch, "method", "outcome"],
            registry=r,
        )
        self.platform_rate_limited = Counter(
            "gateway_platform_rate_limited", "Platform 429 answers", ch, registry=r
        )
        self.platform_retry_wait = Counter(
            "gateway_platform_retry_wait_seconds",
            "Seconds the platforms asked us to wait (retry_after of their 429s)",
            ch,
            registry=r,
        )
        self.gc_pauses = Histogram(
            "gateway_gc_pause_seconds",
            "Cyclic garbage collections: each one's pause (bot serve)",
            ["generation"],
            buckets=gc_pauses.BUCKETS,
            registry=r,
        )
        # Made now, never from the collector's hook: `labels()` takes the metric's lock, which a
        # scrape on the same thread may hold when its allocations set off a collection.
        self._generations = [self.gc_pauses.labels(str(g)) for g in range(3)]

        self.transcriptions = Counter(
            "gateway_transcriptions", "Voice notes sent to speech to text", ["outcome"], registry=r
        )
        self.transcription_seconds = Histogram(
            "gateway_transcription_seconds",
            "Speech to text of one voice note (the retry included)",
            buckets=SLOW,
            registry=r,
        )

    def gauges(self, read: Gauges, **help_texts: str) -> None:
        """Gauges read at scrape time: `read()` yields (name, labels, value); every name it may
        yield is given with its help text."""
        self.registry.register(_ScrapeTimeGauges(read, help_texts))

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def _at(self, metric: M, *labels: str) -> M:
        child: M | None = self._children.get((metric, labels))
        if child is None:
            child = self._children[(metric, labels)] = metric.labels(*labels)
        return child

    # -- GatewayMetrics ------------------------------------------------------------------------
    def dedup_hit(self, channel: str) -> None:
        self._at(self.dedup_hits, channel).inc()

    def placeholder_shown(self, channel: str, seconds: float) -> None:
        self._at(self.placeholder_seconds, channel).observe(seconds)

    def turn_finished(self, channel: str, outcome: str, seconds: float) -> None:
        self._at(self.turns, channel, outcome).inc()
        self._at(self.turn_seconds, channel, outcome).observe(seconds)

    def collection_paused(self, generation: int, seconds: float) -> None:
        """A collection's pause (bot/ops/gc_pauses.py). Called inside the collector: it takes
        only the child's value locks, which hold no allocation."""
        self._generations[generation].observe(seconds)

    # -- SpeechObserver --------------------------------------------------------------------------
    def transcription(self, outcome: SpeechOutcome, seconds: float) -> None:
        self._at(self.transcriptions, outcome).inc()
        if outcome in ("ok", "silent", "failed"):  # the service was asked
            self.transcription_seconds.observe(seconds)

    # -- ModelObserver ---------------------------------------------------------------------------
    def model_call(self, call: ModelCall) -> None:
        labels = (call.provider, call.model)
        self._at(self.model_calls, *labels, call.outcome).inc()
        self._at(self.model_seconds, *labels).observe(call.seconds)
        if call.first_token_s is not None:
            self._at(self.model_first_token, *labels).observe(call.first_token_s)
        if call.input_tokens:
            self._at(self.model_tokens, *labels, "in").inc(call.input_tokens)
        if call.output_tokens:
            self._at(self.model_tokens, *labels, "out").inc(call.output_tokens)

    def model_retry(self, provider: str, model: str) -> None:
        self._at(self.model_retries, provider, model).inc()

    def model_fallback(self, from_provider: str, to_provider: str) -> None:
        self._at(self.model_fallbacks, from_provider, to_provider).inc()

    # -- ToolObserver ----------------------------------------------------------------------------
    def tool_call(self, tool: str, outcome: ToolOutcome, seconds: float) -> None:
        self._at(self.tool_calls, tool, outcome).inc()
        self._at(self.tool_seconds, tool).observe(seconds)
        if tool.startswith("mcp__"):  # mcp__<server>__<tool>
            server = tool[5:].partition("__")[0]
            self._at(self.mcp_calls, server, outcome).inc()
            self._at(self.mcp_seconds, server).observe(seconds)

    # -- BudgetObserver, CostObserver ------------------------------------------------------------
    def soft_limit_crossed(self, scope: str) -> None:
        self._at(self.soft_limits, scope).inc()

    def cost_checked(self, today: float, median: float, anomaly: bool) -> None:
        self.cost_today.set(today)
        self.cost_median.set(median)
        self.cost_anomaly.set(1 if anomaly else 0)

    # -- PlatformCalls ---------------------------------------------------------------------------
    def record(
        self, channel: str, method: str, outcome: Outcome, retry_after_s: float | None = None
    ) -> None:
        self._at(self.platform_calls, channel, method, outcome).inc()
        if outcome == "rate_limited":
            self._at(self.platform_rate_limited, channel).inc()
            if retry_after_s:
                self._at(self.platform_retry_wait, channel).inc(retry_after_s)


class _ScrapeTimeGauges(Collector):
    def __init__(self, read: Gauges, help_texts: dict[str, str]) -> None:
        self._read = read
        self._help = help_texts

    def describe(self) -> Iterable[Metric]:
        return [GaugeMetricFamily(name, text) for name, text in self._help.items()]

    def collect(self) -> Iterator[Metric]:
        families: dict[str, GaugeMetricFamily] = {}
        for name, labels, value in self._read():
            family = families.get(name)
            if family is None:
                family = families[name] = GaugeMetricFamily(
                    name, self._help[name], labels=list(labels)
                )
            family.add_metric(list(labels.values()), value)
        for name, text in self._help.items():
            yield families.get(name) or GaugeMetricFamily(name, text, labels=[])
