"""A turn lost to another process (its lease ran out while this one stalled) writes nothing more:
through the real coordinator and SQLite store, with the real `TurnSignal` the heartbeat uses."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from pathlib import Path
from typing import Any

from agent.coordinator import NOT_FINISHED, AgentSettings, Coordinator, TurnInput
from agent.personas import Persona
from agent.providers.scripted import Reply, ScriptedProvider
from agent.types import Usage
from bot.conversations import TurnSignal
from bot.storage import SqliteStore
from tools.base import ToolContext
from tools.events import TurnEvent
from tools.registry import ToolRegistry, tool


@tool
async def slow_lookup(ctx: ToolContext) -> str:
    """Answers once the test lets it."""
    ctx.services["started"].set()
    await ctx.services["release"].wait()
    return "found"


async def _emit(event: TurnEvent) -> None:
    return None


def _rows(folder: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(folder / "bot.db") as db:
        return db.execute(sql, args).fetchall()


async def _run(tmp_path: Path, end: str) -> str:
    """A turn stopped (`end` "stop") or lost ("lose") while its tool runs; its turn id."""
    provider = ScriptedProvider(
        [Reply(calls=[("slow_lookup", {})], usage=Usage(11, 2)), Reply("done")]
    )
    registry = ToolRegistry()
    registry.add(slow_lookup)
    services = {"started": asyncio.Event(), "release": asyncio.Event()}
    persona = Persona("default", "test", ("slow_lookup",), None, None, "be brief", None, "v1")
    async with SqliteStore(tmp_path / "bot.db") as store:
        coordinator = Coordinator(
            provider=provider,
            registry=registry,
            store=store,
            settings=AgentSettings(),
            services=services,
        )
        session = await store.active_session(channel="web", conversation_key="c", user_id="u")
        turn_id = uuid.uuid4().hex
        turn = TurnInput(persona, session, turn_id, "u", "web", "c", "look it up")
        signal = TurnSignal()
        signal.work = asyncio.create_task(coordinator.run_turn(turn, _emit, None, signal))
        await services["started"].wait()
        if end == "lose":
            signal.lose()
        else:
            signal.stop()
        await asyncio.gather(signal.work, return_exceptions=True)
    return turn_id


async def test_a_stopped_turn_closes_the_call_it_left_open(tmp_path: Path) -> None:
    turn_id = await _run(tmp_path, "stop")
    sql = "select content from messages where turn_id = ? and role = 'tool'"
    assert _rows(tmp_path, sql, turn_id) == [(NOT_FINISHED,)]


async def test_a_lost_turn_writes_nothing_more(tmp_path: Path) -> None:
    """The process that took the turn over answers the open call itself (bot/resume.py): a
    "not finished" from this one would be a second result for one call id, which the vendors
    refuse on the next request."""
    turn_id = await _run(tmp_path, "lose")
    roles = _rows(tmp_path, "select role from messages where turn_id = ? order by id", turn_id)
    assert roles == [("user",), ("assistant",)]  # written while the turn was this process's
    assert _rows(tmp_path, "select count(*) from audit_logs where turn_id = ?", turn_id) == [(0,)]
    usage = "select input_tokens, output_tokens from usage where turn_id = ?"
    assert _rows(tmp_path, usage, turn_id) == [(11, 2)]  # the first call's, with its message
