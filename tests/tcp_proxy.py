"""A TCP proxy for tests: passes each connection on to one server, and can break them all.

The shared servers (PostgreSQL, the fakes) are never stopped or moved by a test; a test puts
this in front of one to reach it from another address (tests/netns_kit.py) or to make it
unreachable or silent (tests/pg_kit.py `CuttableLink`).
"""

from __future__ import annotations

import asyncio
from typing import Self


class TcpProxy:
    """Listens on (`host`, any port; `port` once listening), passes each connection to
    `upstream`; `cut()` breaks every connection and stops listening; while `flowing` is clear,
    nothing passes."""

    def __init__(self, upstream: tuple[str, int], host: str = "127.0.0.1") -> None:
        self.upstream = upstream
        self.host = host
        self.port = 0
        self.flowing = asyncio.Event()
        self.flowing.set()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._pipes: set[asyncio.Task[None]] = set()

    async def listen(self) -> None:
        """Accept connections (again, after a `cut()`: on the same port)."""
        self._server = await asyncio.start_server(self._accept, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def cut(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in list(self._writers):
            writer.transport.abort()  # an RST: what a dead host's router or a restart looks like
        for pipe in list(self._pipes):
            pipe.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}
        for src, dst in ((reader, up_writer), (up_reader, writer)):
            pipe = asyncio.create_task(self._pipe(src, dst))
            self._pipes.add(pipe)
            pipe.add_done_callback(self._pipes.discard)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65536):
                await self.flowing.wait()
                dst.write(data)
                await dst.drain()
        except OSError:
            pass
        finally:
            dst.close()
            self._writers.discard(dst)

    async def __aenter__(self) -> Self:
        await self.listen()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.cut()
