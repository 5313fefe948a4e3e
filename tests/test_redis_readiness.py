"""`/readyz` in multi-process mode names Redis while it is unreachable (no message can be taken
then, on any channel) and is ready again once it answers: a load balancer or orchestrator that
probes /readyz sees the real dependency, as /healthz already shows it."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from agent.providers.scripted import ScriptedProvider
from bot.runtime.app import App
from tests.conftest import make_config
from tests.test_multiprocess import _free_port, _until_up

pytestmark = pytest.mark.process


async def _readyz(session: aiohttp.ClientSession, app: App) -> tuple[int, dict[str, Any]]:
    async with session.get(f"{app.url}/readyz") as response:
        return response.status, await response.json()


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="no redis-server to start")
async def test_readyz_names_redis_while_it_is_down_and_is_ready_when_it_answers(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    port = _free_port()  # nothing listens there yet
    config = make_config(tmp_path, redis={"url": f"redis://127.0.0.1:{port}/0"})
    server: asyncio.subprocess.Process | None = None
    try:
        async with App(config, base_dir=tmp_path, provider=ScriptedProvider([])) as app:
            status, body = await _readyz(session, app)
            assert status == 503 and "redis" in body["down"], body

            server = await asyncio.create_subprocess_exec(
                *["redis-server", "--port", str(port), "--bind", "127.0.0.1"],
                *["--save", "", "--appendonly", "no"],
                stdout=asyncio.subprocess.DEVNULL,
            )
            await _until_up(port)
            async with asyncio.timeout(20):
                while (status := (await _readyz(session, app))[0]) != 200:  # noqa: ASYNC110
                    await asyncio.sleep(0.1)
    finally:
        if server is not None:
            server.terminate()
            await server.wait()
