"""A model call's usage row is written with the message it wrote (one transaction), through the
real coordinator and SQLite store: it is in the store while the tools it called still run."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from agent.coordinator import AgentSettings, Coordinator, TurnInput
from agent.personas import Persona
from agent.providers.scripted import Reply, ScriptedProvider
from agent.types import Usage
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


async def test_a_model_calls_usage_is_stored_with_its_message(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [
            Reply(calls=[("slow_lookup", {})], usage=Usage(11, 2)),
            Reply("done", usage=Usage(20, 3)),
        ]
    )
    registry = ToolRegistry()
    registry.add(slow_lookup)
    services = {"started": asyncio.Event(), "release": asyncio.Event()}
    persona = Persona("default", "test", ("slow_lookup",), None, None, "be brief", None, "v1")

    async def emit(event: TurnEvent) -> None:
        return None

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
        running = asyncio.create_task(coordinator.run_turn(turn, emit))
        await services["started"].wait()
        # the first call's message (its tool call) is recorded before the tool runs: so is its
        # usage, in the same transaction
        assert await store.turn_usage(turn_id) == {
            "model_calls": 1,
            "input_tokens": 11,
            "output_tokens": 2,
        }
        services["release"].set()
        assert (await running).text == "done"
        assert await store.turn_usage(turn_id) == {
            "model_calls": 2,
            "input_tokens": 31,
            "output_tokens": 5,
        }
