"""A model call's usage row is written with the message it wrote (one transaction), through the
real coordinator and SQLite store: it is in the store while the tools it called still run."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent.providers.scripted import Reply
from agent.types import Usage
from bot.storage import SqliteStore
from tests.slow_turn_kit import ignore, slow_turn


async def test_a_model_calls_usage_is_stored_with_its_message(tmp_path: Path) -> None:
    replies = [
        Reply(calls=[("slow_lookup", {})], usage=Usage(11, 2)),
        Reply("done", usage=Usage(20, 3)),
    ]
    async with SqliteStore(tmp_path / "bot.db") as store:
        scene = await slow_turn(store, replies)
        turn_id = scene.turn.turn_id
        running = asyncio.create_task(scene.coordinator.run_turn(scene.turn, ignore))
        await scene.started.wait()
        # the first call's message (its tool call) is recorded before the tool runs: so is its
        # usage, in the same transaction
        assert await store.turn_usage(turn_id) == {
            "model_calls": 1,
            "input_tokens": 11,
            "output_tokens": 2,
        }
        scene.release.set()
        assert (await running).text == "done"
        assert await store.turn_usage(turn_id) == {
            "model_calls": 2,
            "input_tokens": 31,
            "output_tokens": 5,
        }
