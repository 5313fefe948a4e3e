"""The `Provider` protocol: turn a provider-neutral request into a stream of model events.

Errors a provider raises (SDK errors are mapped at the boundary, never leaked)::

    ProviderError                 the call failed
     ├── ProviderUnavailable      worth retrying, then failing over (429, 5xx, overloaded, timeouts)
     └── ProviderRejected         retrying will not help (bad key, bad request, spend cap)
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from agent.types import ModelEvent, ModelRequest


class ProviderError(Exception):
    """A model call failed. `user_message` is safe to show in the chat (no secrets, no internals)."""

    user_message = "the AI model is not reachable right now. Please try again in a minute."


class ProviderUnavailable(ProviderError):
    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ProviderRejected(ProviderError):
    """The provider refused the request; the same request will fail again."""

    user_message = "the AI model refused the request (the bot's admin should check its API key and model)."


class Provider(Protocol):
    name: str  # "anthropic", "openai", "offline", "scripted"
    model: str

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]: ...
