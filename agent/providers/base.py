"""The `Provider` protocol: turn a provider-neutral request into a stream of model events.

Errors a provider raises (SDK errors are mapped at the boundary, never leaked)::

    ProviderError                 the call failed
     ├── ProviderUnavailable      worth retrying, then failing over (429, 5xx, overloaded, timeouts)
     └── ProviderRejected         retrying will not help (bad key, bad request, spend cap)
          └── ToolsUnsupported    the server refuses the `tools` parameter (text mode can help)

    ProviderConfigError           the config cannot build a provider (a missing key): startup error
"""

from __future__ import annotations

from typing import Protocol

from agent.types import ModelRequest, ModelStream


class ProviderError(Exception):
    """A model call failed. `user_message` is safe to show in the chat (no secrets, no internals);
    `user_key` is that text's key in the gateway's catalogues (content/locales/: "Sorry — " and
    it, in each language; None: the message has no translation, show it as it is). str() is for
    the log: what failed and what to fix, never the key."""

    user_message = "the AI model is not reachable right now. Please try again in a minute."
    user_key: str | None = "provider.unavailable"

    def __init__(
        self, message: str, *, user_message: str | None = None, user_key: str | None = None
    ) -> None:
        super().__init__(message)
        if user_message is not None:
            self.user_message = user_message
            self.user_key = user_key


class ProviderUnavailable(ProviderError):
    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        user_message: str | None = None,
        user_key: str | None = None,
    ) -> None:
        super().__init__(message, user_message=user_message, user_key=user_key)
        self.retry_after = retry_after


class ProviderRejected(ProviderError):
    """The provider refused the request; the same request will fail again."""

    user_message = (
        "the AI model refused the request (the bot's admin should check its API key and model)."
    )
    user_key = "provider.rejected"


class ToolsUnsupported(ProviderRejected):
    """The model or server does not do native function calling (`llm.tool_mode: auto` switches)."""


class ProviderConfigError(ValueError):
    """The `llm` config cannot build a provider; str() is one line naming the key and the fix."""


class Provider(Protocol):
    name: str  # "anthropic", "openai", "offline", "scripted"
    model: str

    def stream(self, request: ModelRequest) -> ModelStream: ...
