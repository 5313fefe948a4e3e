"""A message a `/stop` dropped from the queue gets a `message.dropped` frame of its own (the
gateway's "Stopped (… N queued)" note only counts them, and only when no turn was running):
through a running app and a real web socket client."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import ClientSession

from agent.providers.scripted import Reply, ScriptedProvider
from bot.pipeline.turn import STOPPED
from tests.agents_kit import TASK, Probe, Router, dispatch, registry_with, write_personas
from tests.conftest import Running, connect


def _echo_of(cid: str) -> Callable[[dict[str, Any]], bool]:
    return lambda frame: frame["type"] == "message.user" and frame["message_id"] == cid


async def test_each_message_a_stop_dropped_gets_its_frame_and_replays(
    running: Running, tmp_path: Path, session: ClientSession
) -> None:
    probe = Probe()
    router = Router(
        default=[Reply(calls=[dispatch("specialist-a", TASK)]), Reply("never")],
        specialist_a=[Reply(calls=[("slow_tool", {})]), Reply("never either")],
    )
    folder = write_personas(tmp_path / "personas")
    app = await running(
        ScriptedProvider(router), registry=registry_with(probe), personas={"dirs": [str(folder)]}
    )
    client = await connect(session, app)
    ready = await client.hello()
    await client.send(type="message", text="long job", client_message_id="c_long")
    await asyncio.wait_for(probe.slow_started.wait(), 5)
    for cid in ("c_q1", "c_q2"):
        await client.send(type="message", text=f"queued {cid}", client_message_id=cid)
        await client.seen(_echo_of(cid))  # taken: it is queued
    await client.send(type="stop")
    final = await client.until_type("message.completed")
    assert final["text"] == STOPPED  # the running turn's placeholder says it
    dropped = [f for f in client.frames if f["type"] == "message.dropped"]
    assert [(f["message_id"], f["reason"]) for f in dropped] == [
        ("c_q1", "stopped"),
        ("c_q2", "stopped"),
    ]
    assert all(isinstance(f["seq"], int) and f["seq"] > ready["seq"] for f in dropped)
    probe.release.set()
    await app.gateway.wait_idle()

    # a reload (or a second tab) replays them with the rest of the conversation
    again = await connect(session, app)
    await again.hello(resume_after=dropped[0]["seq"] - 1)
    replayed = await again.until(
        lambda f: f["type"] == "message.dropped" and f["message_id"] == "c_q2"
    )
    assert replayed == dropped[1]
    assert len(router.seen["default"]) == 1  # nothing dropped reached the model
