"""Each model call, measured: who served it, how it ended, how long it took, what it cost.

`meter(provider, observer)` (metering.py) wraps every provider of a chain (the vendors inside a
`ResilientProvider`, or the one provider) in a `MeteredProvider`, which reports one `ModelCall`
per attempt, a retry and a fallback included, to the observer (the app's metrics and its
readiness, bot/ops/metrics.py and bot/ops/readiness.py). The chain's retries and fallbacks are reported
by `ResilientProvider` through the same observer.
"""

from __future__ import annotations

import time
from contextlib import aclosing
from dataclasses import dataclass
from typing import Literal, Protocol

from agent.providers.base import Provider, ProviderRejected, ProviderUnavailable
from agent.types import ModelRequest, ModelStream, TextDelta, ToolCallEvent, Usage

CallOutcome = Literal["ok", "unavailable", "rejected", "cancelled", "error"]


@dataclass(frozen=True, slots=True)
class ModelCall:
    provider: str
    model: str
    outcome: CallOutcome
    seconds: float
    first_token_s: float | None  # None: nothing was streamed
    input_tokens: int = 0
    output_tokens: int = 0
    error: str | None = None  # for the log and /readyz: already free of keys (classify.py)


class ModelObserver(Protocol):
    def model_call(self, call: ModelCall) -> None: ...

    def model_retry(self, provider: str, model: str) -> None: ...

    def model_fallback(self, from_provider: str, to_provider: str) -> None: ...


class MeteredProvider:
    """One provider, measured; everything else about it is the provider's own."""

    def __init__(self, inner: Provider, observer: ModelObserver) -> None:
        self.inner = inner
        self.observer = observer
        self.name = inner.name
        self.model = inner.model

    @property
    def description(self) -> str:
        return getattr(self.inner, "description", None) or f"{self.name} ({self.model})"

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()

    async def stream(self, request: ModelRequest) -> ModelStream:
        started = time.perf_counter()
        first: float | None = None
        tokens_in = tokens_out = 0
        outcome: CallOutcome = "cancelled"  # closed early (a /stop) or cancelled
        error: str | None = None
        try:
            # aclosing: a stopped turn closes the HTTP stream inside now, not when GC finds it
            async with aclosing(self.inner.stream(request)) as events:
                async for event in events:
                    if first is None and isinstance(event, TextDelta | ToolCallEvent):
                        first = time.perf_counter() - started
                    elif isinstance(event, Usage):
                        tokens_in += event.input_tokens
                        tokens_out += event.output_tokens
                    yield event
            outcome = "ok"
        except ProviderUnavailable as exc:
            outcome, error = "unavailable", str(exc)
            raise
        except ProviderRejected as exc:
            outcome, error = "rejected", str(exc)
            raise
        except Exception as exc:
            outcome, error = "error", f"{type(exc).__name__}: {exc}"
            raise
        finally:
            self.observer.model_call(
                ModelCall(
                    self.name,
                    request.model or self.model,
                    outcome,
                    time.perf_counter() - started,
                    first,
                    tokens_in,
                    tokens_out,
                    error,
                )
            )
