"""A turn lost to another process (its lease ran out while this one stalled) writes nothing more:
through the real coordinator and SQLite store, with the real `TurnSignal` the heartbeat uses."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from pathlib import Path
from typing import Any

from agent.coordinator import NOT_FINISHED, AgentSettings, Coordinator, TurnInput
from agent.personas import PersonaLibrary
from agent.providers.scripted import Reply, ScriptedProvider
from agent.types import Usage
from agent.workers import Workers, WorkerSettings
from bot.pipeline.conversations import TurnSignal
from bot.storage import SqliteStore
from tests.agents_kit import TASK, Probe, Router, dispatch, registry_with, write_personas
from tests.slow_turn_kit import ignore, slow_turn
from tools.base import ToolDeps
from tools.control import CONTROL


def _rows(folder: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(folder / "bot.db") as db:
        return db.execute(sql, args).fetchall()


async def _run(tmp_path: Path, end: str) -> str:
    """A turn stopped (`end` "stop") or lost ("lose") while its tool runs; its turn id."""
    replies = [Reply(calls=[("slow_lookup", {})], usage=Usage(11, 2)), Reply("done")]
    async with SqliteStore(tmp_path / "bot.db") as store:
        scene = await slow_turn(store, replies)
        signal = TurnSignal()
        signal.work = asyncio.create_task(
            scene.coordinator.run_turn(scene.turn, ignore, None, signal)
        )
        await scene.started.wait()
        if end == "lose":
            signal.lose()
        else:
            signal.stop()
        await asyncio.gather(signal.work, return_exceptions=True)
    return scene.turn.turn_id


async def test_a_stopped_turn_closes_the_call_it_left_open(tmp_path: Path) -> None:
    turn_id = await _run(tmp_path, "stop")
    sql = "select content from messages where turn_id = ? and role = 'tool'"
    assert _rows(tmp_path, sql, turn_id) == [(NOT_FINISHED,)]


async def test_a_lost_turn_writes_nothing_more(tmp_path: Path) -> None:
    """The process that took the turn over answers the open call itself (bot/pipeline/resume.py): a
    "not finished" from this one would be a second result for one call id, which the vendors
    refuse on the next request."""
    turn_id = await _run(tmp_path, "lose")
    roles = _rows(tmp_path, "select role from messages where turn_id = ? order by id", turn_id)
    assert roles == [("user",), ("assistant",)]  # written while the turn was this process's
    assert _rows(tmp_path, "select count(*) from audit_logs where turn_id = ?", turn_id) == [(0,)]
    usage = "select input_tokens, output_tokens from usage where turn_id = ?"
    assert _rows(tmp_path, usage, turn_id) == [(11, 2)]  # the first call's, with its message


async def test_a_lost_turns_specialist_writes_nothing_for_it(tmp_path: Path) -> None:
    """Its specialist is killed with the turn's work; its transcript, audit rows and usage
    (counted in the turn's totals) are not written either."""
    probe = Probe()
    router = Router(
        default=[Reply(calls=[dispatch("specialist-a", TASK)], usage=Usage(11, 2))],
        specialist_a=[
            Reply(calls=[("lookup", {"query": "crew"})], usage=Usage(5, 1)),
            Reply(calls=[("slow_tool", {})], usage=Usage(6, 1)),
        ],
    )
    personas = PersonaLibrary([write_personas(tmp_path / "personas")])
    assert personas.load() == []
    registry = registry_with(probe)
    for control in CONTROL:
        registry.add(control)
    async with SqliteStore(tmp_path / "bot.db") as store:
        workers = Workers(
            provider=ScriptedProvider(router),
            registry=registry,
            store=store,
            personas=personas,
            settings=WorkerSettings(),
        )
        coordinator = Coordinator(
            provider=ScriptedProvider(router),
            registry=registry,
            store=store,
            settings=AgentSettings(),
            personas=personas,
            deps=ToolDeps(agents=workers),
        )
        owner = asyncio.create_task(workers.run())
        try:
            session = await store.active_session(channel="web", conversation_key="c", user_id="u")
            turn_id = uuid.uuid4().hex
            turn = TurnInput(personas.get("default"), session, turn_id, "u", "web", "c", "go")
            signal = TurnSignal()
            signal.work = asyncio.create_task(coordinator.run_turn(turn, ignore, None, signal))
            await asyncio.wait_for(probe.slow_started.wait(), 5)
            signal.lose()
            await asyncio.gather(signal.work, return_exceptions=True)
            killed = [task.task for task in workers.tasks.values() if task.task is not None]
            await asyncio.wait_for(asyncio.gather(*killed, return_exceptions=True), 5)
        finally:
            owner.cancel()
            await asyncio.gather(owner, return_exceptions=True)
    usage = "select input_tokens, output_tokens from usage where turn_id = ?"
    assert _rows(tmp_path, usage, turn_id) == [(11, 2)]  # the coordinator's, before it was lost
    child = "select count(*) from messages where session_id != ?"
    assert _rows(tmp_path, child, session) == [(0,)]
    audit = "select tool_name from audit_logs where turn_id = ? order by id"
    assert _rows(tmp_path, audit, turn_id) == [("lookup",)]  # it ended before the turn was lost
