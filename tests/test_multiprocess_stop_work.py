"""A stop pressed on one real `bot serve` process ends the work of the turn another one runs:
that process's model stream is closed (the fake model sees it), its MCP calls are cancelled on
the server (it logs them), its specialists are killed (the store says so), and the widget on
the first process sees the answer end stopped. Redis carries the stop between them.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from contextlib import AsyncExitStack
from pathlib import Path

import aiohttp
import pytest

from bot.pipeline.turn import STOPPED
from tests.processes import Gateway, frames_until, joined_logs, one_gateway, open_tab, write_config
from tests.redis_kit import URL, prefix
from tests.stop_kit import WAIT_S, StopModel, log_count, sections

__all__ = ["prefix"]
pytestmark = [pytest.mark.process, pytest.mark.timeout(300)]


def specialists(folder: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(folder / "bot.db") as db:
        rows = db.execute(
            "select agent_id, status from chat_sessions where parent_session_id is not null"
        ).fetchall()
    return sorted(rows)


async def until_logged(log: Path, text: str, count: int) -> None:
    async with asyncio.timeout(WAIT_S):
        while log_count(log, text) < count:  # noqa: ASYNC110 (a child process's log file)
            await asyncio.sleep(0.02)


async def until_ready(session: aiohttp.ClientSession, gateway: Gateway) -> None:
    """Until /readyz says the required MCP server is up (its tools are offered from then on)."""
    async with asyncio.timeout(WAIT_S):
        while True:
            async with session.get(f"{gateway.url}/readyz") as response:
                if response.status == 200:
                    return
            await asyncio.sleep(0.05)  # noqa: ASYNC110 (no event crosses the process boundary)


async def test_a_stop_on_a_ends_the_model_call_tools_and_specialists_b_runs(
    prefix: str, tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    visitor = f"visitor-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "mcp.log"
    running: list[Gateway] = []
    async with StopModel("work") as model, AsyncExitStack() as stack:
        config = sections(tmp_path, model, log)
        config["mcp"]["servers"]["demo"]["required"] = True
        path = write_config(tmp_path, redis={"url": URL, "prefix": prefix, "lease_s": 4}, **config)
        try:
            b = await stack.enter_async_context(one_gateway(path, {}))
            running.append(b)
            await until_ready(session, b)
            tab_b = await open_tab(session, b, visitor)
            await tab_b.send_json({"type": "message", "text": "do all the work"})
            placeholder = (await frames_until(tab_b, lambda f: f["type"] == "message.created"))[-1]
            await model.wait_requests(3, timeout=WAIT_S)  # coordinator, alpha, beta: on B
            await until_logged(log, "slow started", 2)

            a = await stack.enter_async_context(one_gateway(path, {}))
            running.append(a)
            tab_a = await open_tab(session, a, visitor)
            assert not model.closed
            await tab_a.send_json({"type": "stop"})

            await model.wait_closed(1, timeout=WAIT_S)  # beta's stream, on B
            await until_logged(log, "cancelled slow", 2)  # B's two MCP calls
            ended = await frames_until(
                tab_a,
                lambda f: (
                    f["type"] == "message.completed"
                    and f["message_id"] == placeholder["message_id"]
                ),
            )
            assert ended[-1]["text"] == STOPPED and ended[-1]["stopped"] is True
            async with asyncio.timeout(WAIT_S):
                while [s for _, s in specialists(tmp_path)] != ["killed", "killed"]:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)  # the store, written by B
            assert specialists(tmp_path) == [
                ("specialist-alpha", "killed"),
                ("specialist-beta", "killed"),
            ]
            assert sorted(model.asked) == ["alpha", "beta", "coordinator"]
            await tab_a.close()
            await tab_b.close()
        except (AssertionError, TimeoutError):
            raise AssertionError(f"the logs:\n{joined_logs(running)}") from None
