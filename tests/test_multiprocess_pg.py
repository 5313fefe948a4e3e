"""Two real `bot serve` processes on PostgreSQL (`storage.url`) and one Redis, the database
going away mid-run and coming back: no crash loop, /readyz on each names the storage while it
is down, the turn it cut short ends in its placeholder (never left hanging), and once it is back
the user's resend is answered, once.

The shared server is never stopped: the processes reach it through `CuttableLink` (a TCP proxy
the test cuts: every connection reset, new ones refused; then restored on the same port).
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import asyncpg
import pytest

from bot.pipeline.turn import STORAGE_FAILED
from tests.gated_model import GatedOpenAI, gated_config
from tests.pg_kit import CuttableLink, pg_database, pg_url
from tests.processes import Gateway, frames_until, gateways, joined_logs, open_tab
from tests.redis_kit import prefix

__all__ = ["pg_database", "pg_url", "prefix"]
pytestmark = [pytest.mark.process, pytest.mark.timeout(300)]
Frame = dict[str, Any]


async def readiness(session: aiohttp.ClientSession, gateway: Gateway) -> tuple[int, Any]:
    async with session.get(f"{gateway.url}/readyz") as response:
        return response.status, await response.json()


async def ask(ws: aiohttp.ClientWebSocketResponse, text: str, cmid: str) -> list[Frame]:
    """Send; the frames until the answer to it (or the apology in its placeholder)."""
    await ws.send_json({"type": "message", "text": text, "client_message_id": cmid})
    created: list[str] = []

    def done(frame: Frame) -> bool:
        if frame["type"] == "message.created" and frame.get("reply_to") == cmid:
            created.append(frame["message_id"])
        return frame["type"] == "message.completed" and frame["message_id"] in created

    return await frames_until(ws, done, timeout=90)


async def test_postgresql_cut_and_restored_mid_run(
    prefix: str, pg_url: str, tmp_path: Any, session: aiohttp.ClientSession
) -> None:
    link = CuttableLink()
    await link.restore()
    async with GatedOpenAI() as model:
        config = gated_config(tmp_path, prefix, model, storage={"url": link.url(pg_url)})
        try:
            async with gateways(2, config, {}) as processes:
                try:
                    tab = await open_tab(session, processes[0], "visitor-pg01")
                    await model.allow(1)
                    assert (await ask(tab, "before", "c1"))[-1]["text"] == "answer to before"

                    mid_turn = asyncio.create_task(ask(tab, "during", "c2"))
                    await model.wait_held(2)  # its turn is recorded; the model is thinking
                    await link.cut()
                    for gateway in processes:  # each process names what is down
                        await eventually_down(session, gateway)
                    await model.allow(2)
                    cut_short = await mid_turn
                    # ended, not hanging: with the note, or, if a preview had shown the answer
                    # before its save failed, with that answer kept (never taken back)
                    kept = cut_short[-1]["text"] == "answer to during"
                    assert kept or cut_short[-1]["text"] == STORAGE_FAILED, cut_short[-1]
                    shown = [f["text"] for f in cut_short if f["type"] == "message.updated"]
                    assert kept == any(t.startswith("answer to") for t in shown)  # if seen

                    await link.restore()
                    for gateway in processes:
                        await eventually_ready(session, gateway)
                    await model.allow(3)
                    answered = await ask(tab, "during", "c3")  # the user writes it again
                    assert answered[-1]["text"] == "answer to during"
                    await asyncio.sleep(0.5)  # a second answer, if any, would be on its way
                    assert all(g.process.returncode is None for g in processes)  # no crash
                    await tab.close()
                except (AssertionError, TimeoutError):
                    raise AssertionError(f"the logs:\n{joined_logs(processes)}") from None
        finally:
            await link.cut()
    conn = await asyncpg.connect(pg_url)
    try:
        rows = await conn.fetch("select status, final_text from turns order by seq")
    finally:
        await conn.close()
    # the turn the outage cut short is recorded as ended once the store is back (never left
    # `running`, which a start in embedded mode would resume: bot/pipeline/turn_ends.py)
    cut_status = "completed" if kept else "failed"
    assert [r["status"] for r in rows] == ["completed", cut_status, "completed"]
    assert [r["final_text"] for r in rows if r["status"] == "completed"] == [
        "answer to before",
        *(["answer to during"] if kept else []),
        "answer to during",
    ]


async def eventually_down(session: aiohttp.ClientSession, gateway: Gateway) -> None:
    async with asyncio.timeout(30):
        while True:
            status, body = await readiness(session, gateway)
            if status == 503 and "storage" in body.get("down", {}):
                return
            await asyncio.sleep(0.2)


async def eventually_ready(session: aiohttp.ClientSession, gateway: Gateway) -> None:
    async with asyncio.timeout(30):
        while (await readiness(session, gateway))[0] != 200:  # noqa: ASYNC110 (polled)
            await asyncio.sleep(0.2)
