"""What `/healthz` says of each channel: starting, running, or failed (why, and since when)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from tools.redact import redact_credentials

# A channel that says whether its platform answered (`PlatformStatus`) runs the moment it has on
# its first run, and fails when it has not within this long. After a failure a retry counts only
# once its platform answered again and it has lasted this long (a channel that connects and then
# crashes, again and again, is never ready). One that cannot say runs once a run lasted this long
# without raising (a channel that fails to start, a refused token, fails well before).
SETTLE_S = 5.0
REASON_CHARS = 300

State = Literal["starting", "running", "failed", "stopped"]
PlatformDown = Callable[[], str | None]  # why the platform has not answered; None: it has


@dataclass
class _Channel:
    run_started: float  # monotonic, the current attempt's
    run_started_at: datetime
    failed_since: datetime | None = None  # the first failure of the current streak
    reason: str = ""
    run_failed: bool = False  # this attempt raised; the next has not begun
    stopped: bool = False
    platform: PlatformDown | None = None  # None: the channel cannot tell

    def platform_down(self) -> str | None:
        return None if self.platform is None else self.platform()


class ChannelStates:
    """Recorded by the app's channel supervisor; read, cheaply, by every `/healthz`."""

    def __init__(
        self, *, settle_s: float = SETTLE_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settle_s = settle_s
        self._clock = clock
        self._channels: dict[str, _Channel] = {}

    def started(self, name: str, platform: PlatformDown | None = None) -> None:
        """A run begins. After a failure the channel stays failed until this run settles:
        its platform answered (`platform`, when the channel can tell), else it lasted."""
        previous = self._channels.get(name)
        state = _Channel(self._clock(), datetime.now(UTC), platform=platform)
        if previous is not None:
            state.failed_since, state.reason = previous.failed_since, previous.reason
        self._channels[name] = state

    def failed(self, name: str, reason: str) -> None:
        state = self._channels[name]
        if self._settled(state) or state.failed_since is None:  # it ran fine until now
            state.failed_since = datetime.now(UTC)
        state.run_failed = True
        state.reason = redact_credentials(reason)[:REASON_CHARS]

    def stopped(self, name: str) -> None:
        """The run returned by itself (the terminal's input ended): nothing is wrong."""
        self._channels[name].stopped = True

    def state(self, name: str) -> State:
        return self._state(self._channels[name])[0]

    def _state(self, channel: _Channel) -> tuple[State, str]:
        """The state and, unless running, why."""
        if channel.stopped:
            return "stopped", ""
        if channel.run_failed:
            return "failed", channel.reason
        if channel.platform is not None:
            down = channel.platform_down()
            if down is None and channel.failed_since and not self._settled(channel):
                return (
                    "failed",
                    f"{channel.reason} (retried: up again, not yet for {self.settle_s:g} s)",
                )
            if down is None:
                return "running", ""
            if channel.failed_since or self._settled(channel):
                return "failed", down  # the retry has not been answered either
            return "starting", down
        if channel.failed_since and not self._settled(channel):
            return "failed", channel.reason
        return ("running", "") if self._settled(channel) else ("starting", "")

    def _settled(self, channel: _Channel) -> bool:
        return self._clock() - channel.run_started >= self.settle_s

    def down(self, name: str) -> tuple[str, datetime | None] | None:
        """None when channel `name` runs; else why not (state, reason) and since when."""
        channel = self._channels.get(name)
        if channel is None:
            return "not started yet", None
        state, why = self._state(channel)
        if state == "running":
            return None
        since = channel.failed_since or channel.run_started_at
        if state == "failed":
            return f"failed: {redact_credentials(why)[:REASON_CHARS]}", since
        return (f"{state}: {why}" if why else state), channel.run_started_at

    @property
    def any_starting(self) -> bool:
        """A channel's first run has not connected yet (nor failed)."""
        return any(self.state(name) == "starting" for name in self._channels)

    @property
    def any_failed(self) -> bool:
        return any(self.state(name) == "failed" for name in self._channels)

    def report(self) -> dict[str, dict[str, Any]]:
        """`{"telegram": {"state": "failed", "since": "2026-…Z", "reason": "…"}, …}`."""
        body: dict[str, dict[str, Any]] = {}
        for channel_name, channel in self._channels.items():
            state, why = self._state(channel)
            since = channel.run_started_at
            if state == "failed":
                since = channel.failed_since or channel.run_started_at
            entry: dict[str, Any] = {"state": state, "since": iso_utc(since)}
            if why:
                entry["reason"] = redact_credentials(why)[:REASON_CHARS]
            body[channel_name] = entry
        return body


def iso_utc(at: datetime | None) -> str | None:
    return at.isoformat(timespec="seconds").replace("+00:00", "Z") if at else None
