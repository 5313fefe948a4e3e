"""A TCP proxy in front of the real Redis that can stop passing one process's commands on.

A test points one `bot serve` at it and calls `hold()` at an exact point (say, when the fake
platform receives the turn's final edit): every command the process sends from then on waits
in the proxy, unseen by Redis, as if the process had frozen there. Killing the process then
leaves Redis exactly as it was at that point: the crash window is hit every time, and nothing
of our code is mocked. Replies already on their way still reach the process.
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit


class HoldingProxy:
    def __init__(self, upstream_url: str) -> None:
        parts = urlsplit(upstream_url)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 6379)
        self.db = parts.path or "/0"
        self.held = 0  # bytes of commands held back so far
        self._passing = asyncio.Event()
        self._passing.set()
        self._replying = asyncio.Event()  # cleared: replies are held too (`freeze_after`)
        self._replying.set()
        self._marker: bytes | None = None
        self.frozen = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> str:
        """Listen; the URL to give the process."""
        self._server = await asyncio.start_server(self._connect, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"redis://127.0.0.1:{port}{self.db}"

    def hold(self) -> None:
        """From now on, no command of the proxied process reaches Redis."""
        self._passing.clear()

    def freeze_after(self, marker: bytes) -> None:
        """The first command carrying `marker` reaches Redis; from then on nothing passes
        either way, its reply included: the process stops right after that command ran, and
        never learns that it did (a kill then leaves Redis, and the process's own records,
        exactly as at that instant)."""
        self._marker = marker

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in self._writers:
            writer.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _connect(
        self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter
    ) -> None:
        try:
            server_in, server_out = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_out.close()
            return
        self._writers += [client_out, server_out]
        for pump in (
            self._pump(client_in, server_out, gated=True),
            self._pump(server_in, client_out, gated=False),
        ):
            task = asyncio.create_task(pump)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pump(
        self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, *, gated: bool
    ) -> None:
        try:
            while data := await source.read(65536):
                if gated and not self._passing.is_set():
                    self.held += len(data)
                    await self._passing.wait()  # never set again: held until the process dies
                if not gated and not self._replying.is_set():
                    await self._replying.wait()  # frozen: the process hears nothing more
                if gated and self._marker is not None and self._marker in data:
                    self._marker = None
                    self._replying.clear()  # before the command goes: its reply is held
                    self._passing.clear()
                    self.frozen.set()
                sink.write(data)
                await sink.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(ConnectionError, OSError):
                sink.close()
