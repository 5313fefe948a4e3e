"""`GET /readyz`: is every dependency up? A small registry of named checks, and the model's state.

The app registers its own checks (storage writable, each enabled channel started, the model
answering: bot/runtime/app.py); anything else the gateway depends on adds one the same way:

    app.readiness.add("redis", check)   # check: async () -> Down | None, cheap, bounded
    app.readiness.add("mcp:files", check, required=False)   # reported, never fatal

A check returns None when its dependency is up, or `Down(reason)` (with `since` if it knows
when the trouble began; else the first check that saw it down counts). A check that raises or
takes longer than `CHECK_TIMEOUT_S` is down too. `/readyz` answers 200 with `{"status":
"ready"}` or 503 with every dependency that is down, why, and since when. A dependency added
with `required=False` (an optional MCP server) that is down is listed under `degraded` and
leaves the status ready.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from agent.providers.metered import ModelCall
from bot.ops.health import iso_utc
from tools.redact import redact_credentials

CHECK_TIMEOUT_S = 2.0
REASON_CHARS = 300
# After a model call failed (every retry and fallback of it), the model counts as down until a
# call succeeds, or this long without another failure: then traffic may try it again.
MODEL_DOWN_S = 60.0


@dataclass(frozen=True, slots=True)
class Down:
    reason: str
    since: datetime | None = None


Check = Callable[[], Awaitable[Down | None]]


class Readiness:
    def __init__(self) -> None:
        self._checks: dict[str, Check] = {}
        self._optional: set[str] = set()
        self._since: dict[str, datetime] = {}

    def add(self, name: str, check: Check, *, required: bool = True) -> None:
        if name in self._checks:
            raise ValueError(
                f"a readiness check named {name!r} exists; known: {list(self._checks)}"
            )
        self._checks[name] = check
        if not required:
            self._optional.add(name)

    async def report(self) -> tuple[bool, dict[str, Any]]:
        """(ready, the JSON body of /readyz)."""
        checks = list(self._checks.items())  # one added while these run waits for the next report
        results = await asyncio.gather(*(self._run(check) for _, check in checks))
        down: dict[str, dict[str, Any]] = {}
        degraded: dict[str, dict[str, Any]] = {}
        for (name, _), result in zip(checks, results, strict=True):
            if result is None:
                self._since.pop(name, None)
                continue
            since = result.since or self._since.setdefault(name, datetime.now(UTC))
            reason = redact_credentials(result.reason)[:REASON_CHARS]
            where = degraded if name in self._optional else down
            where[name] = {"reason": reason, "since": iso_utc(since)}
        body: dict[str, Any] = {"status": "not ready" if down else "ready"}
        if down:
            body["down"] = down
        if degraded:
            body["degraded"] = degraded
        return not down, body

    @staticmethod
    async def _run(check: Check) -> Down | None:
        return await run_check(check)


async def run_check(check: Check) -> Down | None:
    """`check`'s answer, bounded: one that raises or takes too long is down too."""
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_S):
            return await check()
    except TimeoutError:
        return Down(f"no answer within {CHECK_TIMEOUT_S:g} s")
    except Exception as exc:
        return Down(f"the check failed: {type(exc).__name__}: {exc}")


@dataclass(slots=True)
class _Endpoint:
    failed_at: float | None = None  # monotonic; None: its last call did not fail
    failed_since: datetime | None = None
    error: str = ""


class ModelWatch:
    """Fed every model call (a `ModelObserver`); the model is down when every provider of the
    chain failed its last call (as unavailable) within `down_s`. A refused request says nothing
    of the provider's health; the offline model never fails."""

    def __init__(
        self, *, down_s: float = MODEL_DOWN_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.down_s = down_s
        self._clock = clock
        self._endpoints: dict[str, _Endpoint] = {}

    def model_call(self, call: ModelCall) -> None:
        endpoint = self._endpoints.setdefault(call.provider + "/" + call.model, _Endpoint())
        if call.outcome == "ok":
            endpoint.failed_at = endpoint.failed_since = None
        elif call.outcome == "unavailable":
            if endpoint.failed_since is None:
                endpoint.failed_since = datetime.now(UTC)
            endpoint.failed_at = self._clock()
            endpoint.error = call.error or "unavailable"

    def model_retry(self, provider: str, model: str) -> None:
        pass

    def model_fallback(self, from_provider: str, to_provider: str) -> None:
        pass

    async def check(self) -> Down | None:
        now = self._clock()
        failing = {
            name: e
            for name, e in self._endpoints.items()
            if e.failed_at is not None and now - e.failed_at < self.down_s
        }
        if not failing or len(failing) < len(self._endpoints):
            return None
        since = min(e.failed_since for e in failing.values() if e.failed_since is not None)
        reasons = "; ".join(f"{name}: {e.error}" for name, e in failing.items())
        return Down(f"the model's last calls failed: {reasons}", since)
