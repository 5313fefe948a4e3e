"""Retries and fallback around the real providers: what the SDKs' own retries (off) cannot know.

For each provider in the chain (`llm.provider`, then `llm.fallback` in order):
- `ProviderUnavailable` (429, 5xx, 529/overloaded — also as an error event mid-stream —,
  connection errors, first-token and total timeouts) is retried up to `max_retries` times with
  exponential backoff, or after exactly the `retry-after` the server asked for. A server that
  asks for more than `max_wait_s` is not waited for: the next provider is tried at once.
- `ProviderRejected` (400/401/403/404, spend cap, quota) is never retried on that provider; the
  next provider in the chain may still serve the call (another vendor's key is not out of credit).

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
from dataclasses import replace

from agent.providers.base import Provider, ProviderError, ProviderRejected, ProviderUnavailable
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
    ) -> None:
        if not chain:
            raise ValueError("a provider chain needs at least one provider")
        self.chain = tuple(chain)
        self.name = chain[0].name
        self.model = chain[0].model
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_wait_s = max_wait_s

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
        failures: list[ProviderError] = []
        dirty = False  # something of this call was streamed and must be taken back
        for position, provider in enumerate(self.chain):
            call = request if position == 0 else replace(request, model=None)
            for attempt in range(self.max_retries + 1):
                if dirty:
                    yield StreamRestart()
                    dirty = False
                try:
                    async with aclosing(provider.stream(call)) as events:
                        async for event in events:
                            dirty = True
                            yield event
                    return
                except ProviderRejected as exc:
                    failures.append(exc)
                    log.warning("model call refused: %s", exc)
                    break
                except ProviderUnavailable as exc:
                    failures.append(exc)
                    wait = self._wait(exc, attempt)
                    if attempt == self.max_retries or wait is None:
                        log.warning("model call failed, giving up on %s: %s", provider.name, exc)
                        break
                    log.warning("model call failed (%s); retry %d of %d in %.2f s",
                                exc, attempt + 1, self.max_retries, wait)  # fmt: skip
                    if dirty:  # take the partial answer back now, not after the pause
                        yield StreamRestart()
                        dirty = False
                    await asyncio.sleep(wait)
            if position + 1 < len(self.chain):
                nxt = self.chain[position + 1]
                log.warning("falling back to %s (%s)", nxt.name, nxt.model)
        rejected = [f for f in failures if isinstance(f, ProviderRejected)]
        raise (rejected[0] if rejected else failures[-1])

    def _wait(self, exc: ProviderUnavailable, attempt: int) -> float | None:
        """Seconds before the next try; None: not worth waiting for."""
        if exc.retry_after is not None:
            return exc.retry_after if exc.retry_after <= self.max_wait_s else None
        return min(self.max_wait_s, self.backoff_s * 2.0**attempt * random.uniform(0.8, 1.2))
