"""Three real `bot serve` processes on one Redis: a widget tab on process A sees a turn that
process B runs, live, and after a reconnect to process C resumes by `seq` (the frames it
missed, none twice). B runs the turn because it holds the conversation's lease when A takes
the message: it started alone and is still running the conversation's first turn.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from contextlib import AsyncExitStack
from pathlib import Path

import aiohttp
import pytest

from tests.conftest import eventually
from tests.gated_model import GatedOpenAI, gated_config
from tests.processes import (
    HERE,
    Gateway,
    frames_until,
    joined_logs,
    one_gateway,
    open_tab,
    resumed_tab,
)
from tests.redis_kit import prefix, until_queued
from tests.test_multiprocess import Visitor

__all__ = ["prefix"]
pytestmark = [pytest.mark.process, pytest.mark.timeout(300)]


def statuses(folder: Path) -> list[str]:
    with sqlite3.connect(folder / "bot.db") as db:
        return [row[0] for row in db.execute("select status from turns order by rowid")]


async def test_a_tab_on_a_sees_a_turn_run_by_b_and_resumes_by_seq_on_c(
    prefix: str, tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    visitor = f"visitor-{uuid.uuid4().hex[:8]}"
    running: list[Gateway] = []
    async with GatedOpenAI() as model, AsyncExitStack() as stack:
        config = gated_config(tmp_path, prefix, model)
        try:
            b = await stack.enter_async_context(one_gateway(config, {}))
            running.append(b)
            tab_b = Visitor(session, visitor)
            await tab_b.connect(b)
            assert tab_b.ws is not None
            await tab_b.ws.send_json(
                {"type": "message", "text": "first", "client_message_id": "c1"}
            )
            await model.wait_held(1)  # B runs the first turn and holds the lease
            a, c = await asyncio.gather(
                stack.enter_async_context(one_gateway(config, {})),
                stack.enter_async_context(one_gateway(config, {})),
            )
            running += [a, c]

            tab_a = await open_tab(session, a, visitor)
            await tab_a.send_json({"type": "message", "text": "second", "client_message_id": "c2"})
            await until_queued(prefix)  # behind B's running turn
            await model.allow(1)  # the first turn ends; B runs the second: its placeholder
            seen = await frames_until(
                tab_a, lambda f: f["type"] == "message.created" and f.get("reply_to") == "c2"
            )
            await model.wait_held(2)
            placeholder = seen[-1]
            await tab_a.close()  # the tab goes away mid-turn

            await model.allow(2)
            await eventually(lambda: statuses(tmp_path) == ["completed"] * 2, 60)
            resumed = await resumed_tab(session, c, visitor, placeholder)
            ran = [g.logged(HERE) for g in (a, b, c)]
        except (AssertionError, TimeoutError):
            raise AssertionError(f"the logs:\n{joined_logs(running)}") from None
    assert ran == [0, 2, 0]  # both turns ran on B; A and C only relayed
    ready, *replayed = resumed
    assert ready["type"] == "ready" and ready["seq"] == replayed[-1]["seq"]
    assert not any(f.get("history") for f in replayed)  # the replay served it, not the store
    numbers = [f["seq"] for f in replayed]
    assert numbers == sorted(set(numbers)) and numbers[0] > placeholder["seq"]  # only the rest
    assert [f["type"] for f in replayed].count("message.created") == 0  # nothing seen twice
    assert replayed[-1]["text"] == "answer to second"
