"""Retries, fallback and circuit breakers around the real providers: what the SDKs' own retries
(off) cannot know.

For each provider in the chain (`llm.provider`, then `llm.fallback` in order):
- `ProviderUnavailable` (429, 5xx, 529/overloaded — also as an error event mid-stream —,
  connection errors, first-token and total timeouts) is retried up to `max_retries` times with
  exponential backoff, or after exactly the `retry-after` the server asked for. The waits of one
  call never add up to more than `max_wait_s`; a `retry-after` that does not fit, or (with a
  fallback ready) that is longer than our own backoff, is not waited for: the next provider is
  tried at once. A turn has a deadline, and a healthy fallback answers sooner than a pause.
- `ProviderRejected` (400/401/403/404, spend cap, quota) is never retried on that provider; the
  next provider in the chain may still serve the call (another vendor's key is not out of credit).

Each provider has a `CircuitBreaker` (agent/providers/breaker.py) that outlives the call: after
`max_retries + 1` failures in a row, or a `retry-after` we did not wait for, the provider is
skipped for `circuit_open_s`, so the next rounds of a turn (and other turns) go straight to the
fallback; then one trial call tests it again. When every provider's circuit is open, each is
still tried once, without retries: a slow answer, or a quick sorry, beats a certain one.

A call that fails after it streamed something starts over (on a retry or on the next provider)
with a `StreamRestart` event first: the loop drops the partial text and calls and resets the
placeholder, so no text the user saw is ever shown twice. When every provider failed, the first
rejection is raised if there was one (the admin has something to fix), else the last error.

A persona's `model` override applies to the first provider only: model names are vendor-specific.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Sequence
from contextlib import aclosing
from dataclasses import dataclass, field, replace

from agent.providers.base import Provider, ProviderError, ProviderRejected, ProviderUnavailable
from agent.providers.breaker import CircuitBreaker
from agent.providers.metered import ModelObserver
from agent.types import ModelRequest, ModelStream, StreamRestart

log = logging.getLogger(__name__)


class ResilientProvider:
    def __init__(
        self,
        chain: Sequence[Provider],
        *,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        max_wait_s: float = 15.0,
        circuit_open_s: float = 30.0,
    ) -> None:
        if not chain:
            raise ValueError("a provider chain needs at least one provider")
        self.chain = tuple(chain)
        self.name = chain[0].name
        self.model = chain[0].model
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_wait_s = max_wait_s
        # one per provider, for the life of the process: a failing provider is remembered
        self.breakers = tuple(
            CircuitBreaker(threshold=max_retries + 1, open_s=circuit_open_s) for _ in chain
        )
        self.observer: ModelObserver | None = None  # told of retries and fallbacks (metered.py)

    @property
    def description(self) -> str:
        """Which provider and model serve, for the start-up log line."""
        served = [f"{p.name} ({p.model})" for p in self.chain]
        return served[0] + (f", falling back to {', then '.join(served[1:])}" if served[1:] else "")

    async def aclose(self) -> None:
        for provider in self.chain:
            close = getattr(provider, "aclose", None)
            if close is not None:
                await close()

    async def stream(self, request: ModelRequest) -> ModelStream:
        call = _Call(waits_left_s=self.max_wait_s)
        skipped: list[int] = []
        for position in range(len(self.chain)):
            admitted = self.breakers[position].acquire()
            if admitted is None:
                skipped.append(position)
                log.info("skipping %s: its circuit is open for %.0f s more",
                         self.chain[position].name, self.breakers[position].open_for_s)  # fmt: skip
                # passed on as surely as after a failure: the answer must say a backup gave it
                if self.observer is not None and position + 1 < len(self.chain):
                    nxt = self.chain[position + 1]
                    self.observer.model_fallback(self.chain[position].name, nxt.name)
                continue
            tries = self.max_retries + 1 if admitted == "closed" else 1
            trial = admitted != "closed"
            # aclosing: a stopped turn closes the HTTP stream inside now, not when GC finds it
            async with aclosing(self._serve(position, request, tries, call, trial=trial)) as events:
                async for event in events:
                    yield event
            if call.served:
                return
            self._log_next(position)
        if len(skipped) == len(self.chain):
            log.warning("every provider's circuit is open: trying each once")
            for position in skipped:
                async with aclosing(self._serve(position, request, 1, call, trial=False)) as events:
                    async for event in events:
                        yield event
                if call.served:
                    return
        if not call.failures:  # cannot happen: at least one provider was asked
            raise ProviderUnavailable("no provider could be asked")
        rejected = [f for f in call.failures if isinstance(f, ProviderRejected)]
        raise (rejected[0] if rejected else call.failures[-1])

    async def _serve(
        self, position: int, request: ModelRequest, tries: int, call: _Call, *, trial: bool
    ) -> ModelStream:
        """Up to `tries` attempts on one provider; `call.served` says whether one succeeded."""
        provider, breaker = self.chain[position], self.breakers[position]
        request = request if position == 0 else replace(request, model=None)
        verdict = False
        try:
            for attempt in range(tries):
                if call.dirty:
                    yield StreamRestart()
                    call.dirty = False
                try:
                    async with aclosing(provider.stream(request)) as events:
                        async for event in events:
                            call.dirty = True
                            yield event
                except ProviderRejected as exc:
                    call.failures.append(exc)
                    log.warning("model call refused: %s", exc)
                    return  # the request's fault, not the provider's health: no verdict
                except ProviderUnavailable as exc:
                    call.failures.append(exc)
                    wait = self._wait(exc, attempt, call, self._fallback_ready(position))
                    skipped_wait = wait is None and exc.retry_after is not None
                    breaker.failure(open_for_s=exc.retry_after if skipped_wait else None)
                    verdict = True
                    if attempt + 1 == tries or wait is None or breaker.state == "open":
                        log.warning("model call failed, giving up on %s: %s", provider.name, exc)
                        return
                    log.warning("model call failed (%s); retry %d of %d in %.2f s",
                                exc, attempt + 1, tries - 1, wait)  # fmt: skip
                    if self.observer is not None:
                        self.observer.model_retry(provider.name, request.model or provider.model)
                    if call.dirty:  # take the partial answer back now, not after the pause
                        yield StreamRestart()
                        call.dirty = False
                    call.waits_left_s -= wait
                    await asyncio.sleep(wait)
                else:
                    breaker.success()
                    verdict = call.served = True
                    return
        finally:
            if trial and not verdict:
                breaker.release()

    def _fallback_ready(self, position: int) -> bool:
        return any(b.usable for b in self.breakers[position + 1 :])

    def _log_next(self, position: int) -> None:
        if position + 1 < len(self.chain):
            nxt = self.chain[position + 1]
            log.warning("falling back to %s (%s)", nxt.name, nxt.model)
            if self.observer is not None:
                self.observer.model_fallback(self.chain[position].name, nxt.name)

    def _wait(
        self, exc: ProviderUnavailable, attempt: int, call: _Call, fallback_ready: bool
    ) -> float | None:
        """Seconds before the next try; None: not worth waiting for."""
        backoff = min(self.max_wait_s, self.backoff_s * 2.0**attempt * random.uniform(0.8, 1.2))
        wait = backoff if exc.retry_after is None else exc.retry_after
        if fallback_ready and wait > backoff:
            return None  # a healthy fallback answers sooner
        return wait if wait <= call.waits_left_s else None


@dataclass(slots=True)
class _Call:
    """What one model call carries across providers and attempts."""

    waits_left_s: float
    failures: list[ProviderError] = field(default_factory=list)
    dirty: bool = False  # something of this call was streamed and must be taken back
    served: bool = False
