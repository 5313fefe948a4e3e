"""A local HTTP server for tool tests: canned answers per path, and a record of every request."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Self

from aiohttp import web


@dataclass
class Seen:
    path: str
    query: dict[str, str]
    headers: dict[str, str]


@dataclass
class Canned:
    body: bytes
    status: int = 200
    content_type: str = "application/json"
    hang: bool = False  # never answer (a timeout test)
    piece_bytes: int = 0  # stream the body in pieces this big, a moment apart (0: all at once)


class FakeHttp:
    """`async with FakeHttp() as fake:` serves `fake.routes[path]` on 127.0.0.1."""

    def __init__(self) -> None:
        self.routes: dict[str, Canned] = {}
        self.requests: list[Seen] = []
        self.url = ""
        self._runner: web.AppRunner | None = None

    def json(self, path: str, data: Any, status: int = 200) -> None:
        self.routes[path] = Canned(json.dumps(data).encode(), status)

    def text(
        self, path: str, body: str, content_type: str = "application/xml", status: int = 200
    ) -> None:
        self.routes[path] = Canned(body.encode(), status, content_type)

    def hang(self, path: str) -> None:
        self.routes[path] = Canned(b"", hang=True)

    def stream(self, path: str, body: bytes, piece_bytes: int, content_type: str) -> None:
        """Serve `body` in `piece_bytes` pieces with a pause between them, as a slow server does."""
        self.routes[path] = Canned(body, content_type=content_type, piece_bytes=piece_bytes)

    def seen(self, path: str) -> list[Seen]:
        return [r for r in self.requests if r.path == path]

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(Seen(request.path, dict(request.query), dict(request.headers)))
        canned = self.routes.get(request.path)
        if canned is None:
            return web.Response(status=404, text=f"no route {request.path}")
        if canned.hang:
            await asyncio.Event().wait()
        if canned.piece_bytes:
            response = web.StreamResponse(status=canned.status)
            response.content_type = canned.content_type
            await response.prepare(request)
            try:
                for start in range(0, len(canned.body), canned.piece_bytes):
                    await response.write(canned.body[start : start + canned.piece_bytes])  # drains
                    await asyncio.sleep(0.001)  # the client sees the body arrive piece by piece
                await response.write_eof()
            except ConnectionResetError:
                pass  # the client stopped reading (a body past its cap)
            return response
        return web.Response(
            body=canned.body, status=canned.status, content_type=canned.content_type
        )

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self._answer)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def closed_port_url() -> str:
    """A loopback URL nothing listens on: connecting is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@asynccontextmanager
async def fake_http() -> AsyncIterator[FakeHttp]:
    async with FakeHttp() as fake:
        yield fake
