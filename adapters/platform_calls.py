"""What a channel tells the operator about its calls to its platform: one line per call.

The app hands every channel factory a `PlatformCalls` (`ChannelServices.platform_calls`); the
channel reports each API call it made, once it has an answer:

    services.platform_calls.record("slack", "chat.update", "ok")
    services.platform_calls.record("slack", "chat.update", "rate_limited", retry_after_s=3.0)

`method` is the platform's name of the API method (`sendMessage`, `chat.update`,
`im.v1.message.patch`): a fixed set, so metrics stay bounded; never put a chat or user id in
it. `outcome` is `ok`, `rate_limited` (the platform's 429, with the `retry_after_s` it asked
for) or `error` (anything else: refused, network, timeout). The app counts them in `/metrics`
(bot/ops/metrics.py); `NO_PLATFORM_CALLS` counts nothing, for channels built without an app.
"""

from __future__ import annotations

from typing import Final, Literal, Protocol

Outcome = Literal["ok", "rate_limited", "error"]


class PlatformCalls(Protocol):
    def record(
        self, channel: str, method: str, outcome: Outcome, retry_after_s: float | None = None
    ) -> None:
        """One finished call to the platform; cheap and never raises."""
        ...


class _Uncounted:
    def record(
        self, channel: str, method: str, outcome: Outcome, retry_after_s: float | None = None
    ) -> None:
        pass


NO_PLATFORM_CALLS: Final[PlatformCalls] = _Uncounted()
