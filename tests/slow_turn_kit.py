"""A coordinator turn whose one tool call waits for the test: `started` is set when the tool
runs, and it answers once the test sets `release`."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from agent.coordinator import AgentSettings, Coordinator, TurnInput
from agent.personas import Persona
from agent.providers.scripted import Reply, ScriptedProvider
from bot.storage import SqliteStore
from tools.base import ToolContext
from tools.events import TurnEvent
from tools.registry import Tool, ToolRegistry, tool


def slow_lookup(started: asyncio.Event, release: asyncio.Event) -> Tool:
    @tool(name="slow_lookup")
    async def lookup(ctx: ToolContext) -> str:
        """Answers once the test lets it."""
        started.set()
        await release.wait()
        return "found"

    return lookup


async def ignore(event: TurnEvent) -> None:
    return None


@dataclass
class SlowTurn:
    coordinator: Coordinator
    started: asyncio.Event
    release: asyncio.Event
    turn: TurnInput


async def slow_turn(store: SqliteStore, replies: Sequence[Reply]) -> SlowTurn:
    """A coordinator on `store` scripted with `replies`, and a turn for it to run."""
    started, release = asyncio.Event(), asyncio.Event()
    registry = ToolRegistry([slow_lookup(started, release)])
    persona = Persona("default", "test", ("slow_lookup",), None, None, "be brief", None, "v1")
    coordinator = Coordinator(
        provider=ScriptedProvider(list(replies)),
        registry=registry,
        store=store,
        settings=AgentSettings(),
    )
    session = await store.active_session(channel="web", conversation_key="c", user_id="u")
    turn = TurnInput(persona, session, uuid.uuid4().hex, "u", "web", "c", "look it up")
    return SlowTurn(coordinator, started, release, turn)
