"""Background specialists across real `bot serve` processes: a background result reaches the user
whichever process ran the specialist (once), and TaskStop asked in a turn on one process kills
the specialist running on another.

For TaskStop the turn must run elsewhere than the specialist: the specialist's process is
paused (SIGSTOP, a stalled process), so the other one takes the message (by XAUTOCLAIM if the
paused one had read it); when it resumes it hears the stop and kills its specialist.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from bot.redis.client import connect
from tests.conftest import eventually
from tests.fake_llm import Call, Reply, llm_config
from tests.fake_openai import FakeOpenAI
from tests.processes import (
    HERE,
    ROOT,
    Gateway,
    frames_until,
    gateways,
    joined_logs,
    open_tab,
    write_config,
)
from tests.redis_kit import URL, prefix

__all__ = ["prefix"]
pytestmark = [pytest.mark.process, pytest.mark.timeout(300)]
Body = dict[str, Any]
Step = Reply | Callable[[Body], Reply]
SPECIALIST = """---
name: specialist-archive
description: Finds facts in the archive.
tools: [get_current_datetime]
---
You are SPECIALIST-ARCHIVE.
"""


def dispatch() -> Call:
    args = {
        "description": "archive lookup",
        "subagent_type": "specialist-archive",
        "prompt": "Find the archived fact about the 1969 moon landing crew, in one sentence.",
        "background": True,
    }
    return Call("AgentTool", json.dumps(args))


def tool_results(body: Body) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]


class RoutedOpenAI(FakeOpenAI):
    """Answers the coordinator and the specialist from their own scripts (told apart by the
    system prompt); the specialist's requests wait at `specialist_gate`."""

    def __init__(self, coordinator: list[Step], specialist: list[Step]) -> None:
        super().__init__(script=self._route)
        self.scripts = {"coordinator": coordinator, "specialist": specialist}
        self.seen: dict[str, list[Body]] = {"coordinator": [], "specialist": []}
        self.specialist_gate = asyncio.Event()

    @staticmethod
    def who(body: Body) -> str:
        return (
            "specialist"
            if "SPECIALIST-ARCHIVE" in body["messages"][0]["content"]
            else "coordinator"
        )

    def _route(self, body: Body) -> Reply:
        who = self.who(body)
        step = self.scripts[who].pop(0)
        return step if isinstance(step, Reply) else step(body)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.seen[self.who(body)].append(body)
        if self.who(body) == "specialist":
            await self.specialist_gate.wait()
        return await super()._handle(request)


def _config(folder: Path, prefix: str, model: FakeOpenAI) -> Path:
    personas = folder / "personas"
    personas.mkdir()
    (personas / "default.md").write_text((ROOT / "personas" / "default.md").read_text())
    (personas / "specialist-archive.md").write_text(SPECIALIST)
    llm = llm_config("openai", model, first_token_timeout_s=250, total_timeout_s=280)
    return write_config(
        folder,
        redis={"url": URL, "prefix": prefix, "lease_s": 2},
        personas={"dirs": [str(personas)]},
        llm=llm | {"max_retries": 0},
        agent={"turn_timeout_s": 280, "worker_timeout_s": 280},
        log={"level": "DEBUG"},
    )


async def _tabs(
    session: aiohttp.ClientSession, visitor: str, processes: list[Gateway]
) -> list[aiohttp.ClientWebSocketResponse]:
    """One tab of the visitor on each process."""
    return [await open_tab(session, gateway, visitor) for gateway in processes]


def _completed(text: str) -> Callable[[dict[str, Any]], bool]:
    return lambda f: f["type"] == "message.completed" and f.get("text") == text


def _statuses(folder: Path) -> list[str]:
    sql = "select status from chat_sessions where agent_id = 'specialist-archive'"
    with sqlite3.connect(folder / "bot.db") as db:
        return [row[0] for row in db.execute(sql)]


async def _until_idle(prefix: str) -> None:
    """Until no process holds a conversation (recorded in Redis, so polled)."""
    redis = connect(URL)
    try:
        async with asyncio.timeout(60):
            while await redis.zcard(f"{prefix}q:busy"):  # noqa: ASYNC110 (no event to wait on)
                await asyncio.sleep(0.05)
    finally:
        await redis.aclose()


async def test_a_background_result_reaches_a_tab_on_the_other_process_once(
    prefix: str, tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    model = RoutedOpenAI(
        coordinator=[
            Reply(calls=[dispatch()]),
            Reply(text=["I've asked the archive; I'll report back."]),
            Reply(text=["The archive says: Armstrong, Aldrin, Collins."]),
        ],
        specialist=[Reply(text=["Crew: Armstrong, Aldrin, Collins"])],
    )
    async with model, gateways(2, _config(tmp_path, prefix, model), {}) as processes:
        try:
            tabs = await _tabs(session, f"visitor-{uuid.uuid4().hex[:8]}", processes)
            await tabs[0].send_json(
                {"type": "message", "text": "look it up", "client_message_id": "c1"}
            )
            await frames_until(tabs[0], _completed("I've asked the archive; I'll report back."))
            ran = [g.logged(HERE) for g in processes]
            other = ran.index(0)  # the tab on the process that did not run the specialist
            model.specialist_gate.set()
            answer = "The archive says: Armstrong, Aldrin, Collins."
            seen = await frames_until(tabs[other], _completed(answer))
            await asyncio.sleep(0.5)  # a second follow-up, if any, would be on its way by now
            for tab in tabs:
                await tab.close()
        except (AssertionError, TimeoutError):
            raise AssertionError(f"the logs:\n{joined_logs(processes)}") from None
    follow_up = [f for f in seen if f["type"] == "message.created" and f.get("reply_to") is None]
    assert len(follow_up) == 1
    assert len(model.seen["coordinator"]) == 3 and len(model.seen["specialist"]) == 1
    task_id = tool_results(model.seen["coordinator"][1])[0]["task_id"]
    notice = model.seen["coordinator"][2]["messages"][-1]["content"]
    assert f'task_id="{task_id}"' in notice and "Crew: Armstrong" in notice
    assert _statuses(tmp_path) == ["completed"]


async def test_task_stop_in_a_turn_on_one_process_kills_the_specialist_on_another(
    prefix: str, tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    def stop_it(body: Body) -> Reply:
        task_id = tool_results(model.seen["coordinator"][1])[0]["task_id"]
        return Reply(calls=[Call("TaskStop", json.dumps({"task_id": task_id}))])

    model = RoutedOpenAI(
        coordinator=[
            Reply(calls=[dispatch()]),
            Reply(text=["I've asked the archive."]),
            stop_it,
            Reply(text=["Stopped that task."]),
        ],
        specialist=[Reply(text=["never delivered"])],  # held at the gate until it is killed
    )
    async with model, gateways(2, _config(tmp_path, prefix, model), {}) as processes:
        paused: Gateway | None = None
        try:
            tabs = await _tabs(session, f"visitor-{uuid.uuid4().hex[:8]}", processes)
            await tabs[0].send_json(
                {"type": "message", "text": "look it up", "client_message_id": "c1"}
            )
            await frames_until(tabs[0], _completed("I've asked the archive."))
            await eventually(lambda: len(model.seen["specialist"]) == 1, 60)
            await _until_idle(prefix)  # its turn recorded as ended and its lease let go
            ran = [g.logged(HERE) for g in processes]
            runner, other = ran.index(1), ran.index(0)
            paused = processes[runner]
            paused.process.send_signal(signal.SIGSTOP)  # stalled, its specialist with it

            stop = {"type": "message", "text": "stop that", "client_message_id": "c2"}
            await tabs[other].send_json(stop)
            await frames_until(tabs[other], _completed("Stopped that task."), timeout=90)
            assert processes[other].logged(HERE) == 1  # the TaskStop turn ran on the other
            assert tool_results(model.seen["coordinator"][3])[-1]["status"] == "stop_requested"

            paused.process.send_signal(signal.SIGCONT)
            paused = None
            await frames_until(
                tabs[other], lambda f: f["type"] == "agent.finished" and f["status"] == "killed"
            )
            await eventually(lambda: _statuses(tmp_path) == ["killed"], 30)
            await asyncio.sleep(0.5)  # a late background result, if any, would be on its way
            for tab in tabs:
                await tab.close()
        except (AssertionError, TimeoutError):
            raise AssertionError(f"the logs:\n{joined_logs(processes)}") from None
        finally:
            if paused is not None:
                paused.process.send_signal(signal.SIGCONT)
    assert len(model.seen["coordinator"]) == 4  # no result of the killed task was delivered
