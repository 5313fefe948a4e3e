"""`/stop` sent to one real `bot serve` process stops the turn another process is running: its
placeholder ends as stopped, what was queued behind it is dropped, and the conversation goes
on. Process B runs the turn because it started alone and holds the conversation's lease.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.pipeline.turn import STOPPED
from tests.gated_model import GatedOpenAI, gated_config
from tests.processes import HERE, Gateway, frames_until, joined_logs, one_gateway, open_tab
from tests.redis_kit import prefix, until_queued

__all__ = ["prefix"]
pytestmark = [pytest.mark.process, pytest.mark.timeout(300)]


def turns(folder: Path) -> list[tuple[str, str | None]]:
    with sqlite3.connect(folder / "bot.db") as db:
        return db.execute("select status, final_text from turns order by rowid").fetchall()


async def _dropped(tab: aiohttp.ClientWebSocketResponse, seen: list[dict[str, Any]]) -> Any:
    """The `message.dropped` among the frames `seen` already, or the next one."""
    found = [f for f in seen if f["type"] == "message.dropped"]
    if found:
        return found[-1]
    return (await frames_until(tab, lambda f: f["type"] == "message.dropped"))[-1]


async def test_stop_on_a_stops_the_turn_b_runs_and_drops_what_waited(
    prefix: str, tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    visitor = f"visitor-{uuid.uuid4().hex[:8]}"
    running: list[Gateway] = []
    async with GatedOpenAI() as model, AsyncExitStack() as stack:
        config = gated_config(tmp_path, prefix, model)
        try:
            b = await stack.enter_async_context(one_gateway(config, {}))
            running.append(b)
            tab_b = await open_tab(session, b, visitor)
            await tab_b.send_json({"type": "message", "text": "first", "client_message_id": "c1"})
            placeholder = (await frames_until(tab_b, lambda f: f["type"] == "message.created"))[-1]
            await model.wait_held(1)  # B runs the first turn and holds the lease

            a = await stack.enter_async_context(one_gateway(config, {}))
            running.append(a)
            tab_a = await open_tab(session, a, visitor)
            await tab_a.send_json({"type": "message", "text": "second", "client_message_id": "c2"})
            await until_queued(prefix)  # waiting behind B's turn
            await tab_a.send_json({"type": "stop"})
            ended = await frames_until(
                tab_a,
                lambda f: (
                    f["type"] == "message.completed"
                    and f["message_id"] == placeholder["message_id"]
                ),
            )
            assert ended[-1]["text"] == STOPPED  # B's placeholder, seen on A
            on_b = await frames_until(tab_b, lambda f: f["type"] == "message.completed")
            assert on_b[-1]["text"] == STOPPED
            # "second" was dropped from the queue: both tabs are told, whichever process has them
            for tab, seen in ((tab_a, ended), (tab_b, on_b)):
                dropped = await _dropped(tab, seen)
                assert (dropped["message_id"], dropped["reason"]) == ("c2", "stopped")

            await model.allow(10)  # the stopped request may now end; nothing else may run
            await tab_a.send_json({"type": "message", "text": "third", "client_message_id": "c3"})
            third = await frames_until(
                tab_a, lambda f: f["type"] == "message.completed" and f["text"] != STOPPED
            )
            await asyncio.sleep(0.5)  # a turn for "second", if any, would be on its way by now
            ran = [g.logged(HERE) for g in (a, b)]
            await tab_a.close()
            await tab_b.close()
        except (AssertionError, TimeoutError):
            raise AssertionError(f"the logs:\n{joined_logs(running)}") from None
    assert third[-1]["text"] == "answer to third"
    assert ran[1] >= 1 and sum(ran) == 2  # the stopped turn on B, then "third" anywhere
    assert [status for status, _ in turns(tmp_path)] == ["stopped", "completed"]
    asked = [body["messages"][-1]["content"] for body in model.held]
    assert "second" not in asked and asked[-1] == "third"  # the dropped message never ran
