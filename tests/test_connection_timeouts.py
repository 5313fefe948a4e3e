"""Connections that hold a descriptor and say nothing useful are closed after
`server.idle_timeout_s`: idle ones, and slow header writers (slowloris) that trickle a header
line forever. Health answers all the while. Real sockets against the running app."""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp

from agent.providers.scripted import ScriptedProvider
from tests.conftest import Running

IDLE = 40
SLOW = 20


async def _hung_up(reader: asyncio.StreamReader) -> bool:
    with contextlib.suppress(ConnectionError):
        while await reader.read(1024):
            pass  # an answer (400, say) is fine too; the point is the close
    return True


async def _trickle(writer: asyncio.StreamWriter) -> None:
    """A request head that never ends: one more header line every 0.1 s."""
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    with contextlib.suppress(ConnectionError):
        for n in range(10_000):
            writer.write(b"X-a%d: b\r\n" % n)
            await writer.drain()
            await asyncio.sleep(0.1)


async def test_idle_and_slow_header_connections_are_closed(
    running: Running, session: aiohttp.ClientSession
) -> None:
    app = await running(ScriptedProvider([]), server={"idle_timeout_s": 1})
    idle = [await asyncio.open_connection("127.0.0.1", app.port) for _ in range(IDLE)]
    slow = [await asyncio.open_connection("127.0.0.1", app.port) for _ in range(SLOW)]
    trickles = [asyncio.create_task(_trickle(w)) for _, w in slow]
    for probe in ("/livez", "/healthz"):  # answered while they are all open
        async with session.get(app.url + probe) as response:
            assert response.status == 200
    async with asyncio.timeout(20):  # a hang guard: 1 s is the deadline under test
        closed = await asyncio.gather(*(_hung_up(r) for r, _ in idle + slow))
    assert all(closed) and len(closed) == IDLE + SLOW
    for task in trickles:
        task.cancel()
    await asyncio.gather(*trickles, return_exceptions=True)
    for _, writer in idle + slow:
        writer.close()
    async with session.get(app.url + "/livez") as response:
        assert response.status == 200


async def test_past_max_connections_a_new_one_gets_a_bare_503_at_once(
    running: Running, session: aiohttp.ClientSession
) -> None:
    app = await running(ScriptedProvider([]), server={"max_connections": 5})
    async with session.get(app.url + "/livez") as response:  # the pool keeps this one open
        assert response.status == 200
    held = [await asyncio.open_connection("127.0.0.1", app.port) for _ in range(4)]
    reader, writer = await asyncio.open_connection("127.0.0.1", app.port)
    async with asyncio.timeout(10):  # a hang guard: the answer comes at once
        answer = await reader.read()
    assert answer.startswith(b"HTTP/1.1 503 ") and b"server.max_connections" in answer
    writer.close()
    for _, idle in held:
        idle.close()
    async with aiohttp.ClientSession() as fresh:  # room again once they are gone
        for _ in range(100):
            async with fresh.get(app.url + "/livez") as response:
                if response.status == 200:
                    break
            await asyncio.sleep(0.05)
        assert response.status == 200
