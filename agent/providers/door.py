"""How a vendor module opens a model call's stream: through its SDK's internals, or its public API.

The fast path (prepared.py) uses SDK internals that no release promises to keep. Each SDK's
door (anthropic_sdk.py, openai_sdk.py) is the only module that names them: it looks for each one
once, when the provider is built, and if any is gone, renamed or refuses the test call, the
provider uses the SDK's public `post(path, content=body, stream=True)` instead. That sends the
same bytes and raises the same errors; it is only slower (the figures are in prepared.py). So a
new SDK release makes the gateway slower, never broken, and the log says which path is in use.

`BOT_SDK_INTERNALS=off` forces the public path (read when the provider is built): for the tests
that run both paths, for benchmarks, and as a way out should a release break the fast path in a
way the start-up checks miss.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

log = logging.getLogger(__name__)

INTERNALS_VARIABLE = "BOT_SDK_INTERNALS"
_logged: set[tuple[str, str]] = set()  # (vendor, what was said): each said once


class Events(Protocol):
    """The events of one response, as parsed JSON, in batches: on the fast path a list for each
    chunk read (sse.py), on the public path the SDK's `AsyncStream`, each event a list of one."""

    def __aiter__(self) -> AsyncIterator[list[Any]]: ...

    async def close(self) -> None: ...


class Door(Protocol):
    """Sends one request body; its stream when the response is 2xx, else the SDK's error."""

    async def open(self, body: bytes) -> Events: ...


def internals_allowed(env: Mapping[str, str]) -> bool:
    """False when `BOT_SDK_INTERNALS` says off (0, false, no): the public path only."""
    return env.get(INTERNALS_VARIABLE, "on").strip().lower() not in ("off", "0", "false", "no")


class PublicPost:
    """The SDK's own `post(path, content=body, stream=True)`: its request building, auth, headers
    and error mapping on every call (its retries are off: resilient.py retries)."""

    def __init__(
        self, client: Any, path: str, options: Mapping[str, Any], stream_cls: type[Any]
    ) -> None:
        self._client = client
        self._path = path
        self._options = dict(options)
        self._stream_cls = stream_cls

    async def open(self, body: bytes) -> Events:
        stream = await self._client.post(
            self._path,
            cast_to=object,
            content=body,
            options=self._options,
            stream=True,
            stream_cls=self._stream_cls,
        )
        return _OneByOne(stream)


class _OneByOne:
    """The SDK's `AsyncStream` as `Events`: each event a batch of one."""

    __slots__ = ("_stream",)

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[list[Any]]:
        async for event in self._stream:
            yield [event]

    async def close(self) -> None:
        await self._stream.close()


def fast_path(vendor: str, version: str, missing: list[str], allowed: bool) -> bool:
    """Whether the fast path is taken; logs which path a vendor uses and why, once per process
    (a provider is built per fallback entry and per reload)."""
    fast = allowed and not missing
    if fast:
        how = "requests sent through its internals (the fast path)"
    elif not allowed:
        how = f"its public API ({INTERNALS_VARIABLE}=off)"
    else:
        how = f"its public API, slower: its internals changed ({'; '.join(missing)})"
    if (vendor, how) not in _logged:
        _logged.add((vendor, how))
        log.info("%s SDK %s: %s", vendor, version, how)
    return fast
