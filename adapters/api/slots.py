"""How many answer and event streams may be open at once: per API key, and in all.

Every stream holds a connection (a file descriptor) for up to `stream_timeout_s`: uncapped, one
key opening hundreds of them used every descriptor the process had, and `/healthz`, new web
sockets and the database's own files failed with it. A stream over a cap is refused before
anything of its request is recorded or handed on: 429 `too_many_streams` for the key (its own
streams must end first), 503 `server_busy` when the server is at its limit, both with a
`Retry-After`. Counted per process (each process has its own descriptors).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from adapters.api.errors import ApiError

RETRY_AFTER_S = 5


class StreamSlots:
    def __init__(self, per_key: int, total: int) -> None:
        self.per_key = per_key
        self.total = total
        self._open: Counter[str] = Counter()

    @property
    def open(self) -> int:
        return self._open.total()

    @contextmanager
    def take(self, key_id: str) -> Iterator[None]:
        """A slot for one stream of `key_id`, held until the block ends; or `ApiError`."""
        retry = {"Retry-After": str(RETRY_AFTER_S)}
        if self._open[key_id] >= self.per_key:
            raise ApiError(
                429,
                "too_many_streams",
                f"this API key has {self.per_key} streams open (channels.api."
                "max_streams_per_key); end one, or wait for an answer to finish",
                retry,
            )
        if self.open >= self.total:
            raise ApiError(
                503,
                "server_busy",
                f"the server has {self.total} streams open (channels.api.max_streams);"
                " try again shortly",
                retry,
            )
        self._open[key_id] += 1
        try:
            yield
        finally:
            self._open[key_id] -= 1
            if self._open[key_id] <= 0:
                del self._open[key_id]
