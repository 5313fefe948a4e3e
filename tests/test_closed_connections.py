"""A connection the web server has closed is freed by reference counting: nothing of it is left
for the cyclic collector, whose full collections walk every live object to find it."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from bot.runtime.listener import CappedListener
from tests.conftest import eventually


@pytest.fixture
async def served() -> AsyncIterator[tuple[web.Server, str, int]]:
    """An aiohttp app with a web socket and a plain route behind the gateway's listener."""

    async def socket(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for message in ws:
            await ws.send_str(message.data)
        return ws

    async def plain(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/ws", socket)
    app.router.add_get("/plain", plain)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    assert runner.server is not None
    listener = CappedListener(runner.server, 100)
    port = await listener.open("127.0.0.1", 0)
    try:
        yield runner.server, f"http://127.0.0.1:{port}", port
    finally:
        listener.close()
        await runner.cleanup()


@contextmanager
def cyclic_garbage() -> Iterator[list[Any]]:
    """What a full collection finds unreachable meanwhile (kept to be looked at, then freed)."""
    gc.collect()  # earlier garbage is not this test's
    found: list[Any] = []
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield found
        gc.collect()
        found.extend(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def servers_side(garbage: list[Any], port: int) -> list[str]:
    """The server's objects among `garbage`: its handlers, web sockets and transports."""
    kept = []
    for item in garbage:
        name = type(item).__name__
        if name in ("RequestHandler", "WebSocketResponse", "Request"):
            kept.append(name)
        elif isinstance(item, asyncio.Transport):
            address = item.get_extra_info("sockname")
            if address is not None and address[1] == port:
                kept.append(name)
    return kept


async def test_closed_web_sockets_and_requests_leave_no_cyclic_garbage(
    served: tuple[web.Server, str, int],
) -> None:
    server, url, port = served
    with cyclic_garbage() as garbage:
        async with aiohttp.ClientSession() as client:
            for n in range(5):
                async with client.ws_connect(f"{url}/ws") as ws:
                    await ws.send_str(f"hello {n}")
                    assert (await ws.receive()).data == f"hello {n}"
            async with client.get(f"{url}/plain") as response:
                assert await response.text() == "ok"
        await eventually(lambda: not server.connections)
        await asyncio.sleep(0)  # the transports' last callbacks
    assert servers_side(garbage, port) == []
