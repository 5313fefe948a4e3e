"""A turn resumed after its process died goes on with the conversation's chosen model: the
second process's call reaches the chosen model's own fake server, never the default model."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from agent.providers.scripted import ScriptedProvider
from bot.runtime.app import App
from tests.conftest import make_config
from tests.fake_llm import Call, Reply
from tests.fake_openai import FakeOpenAI
from tests.fakes import RecordingChannel
from tests.test_resume import PERSONA, World, _message, registry_for, snapshot


@contextlib.asynccontextmanager
async def running(
    folder: Path, mini: FakeOpenAI, world: World, default: ScriptedProvider
) -> AsyncIterator[tuple[App, RecordingChannel]]:
    folder.mkdir(exist_ok=True)
    personas = folder / "personas"
    personas.mkdir(exist_ok=True)
    (personas / "default.md").write_text(PERSONA.format(tools='["peek"]'))
    choice = {"name": "mini", "provider": "openai", "model": "mini-model",
              "base_url": mini.url, "api_key": mini.api_key}  # fmt: skip
    config = make_config(
        folder,
        personas={"dirs": [str(personas)]},
        llm={"choices": [choice], "max_retries": 0, "first_token_timeout_s": 5},
    )
    channel = RecordingChannel()
    app = App(
        config,
        base_dir=folder,
        provider=default,
        registry=registry_for(world),
        channels=[channel],
        web_server=False,
    )
    await app.__aenter__()
    try:
        yield app, channel
    finally:
        await app.stop()


async def test_a_resumed_turn_goes_on_with_the_chosen_model(tmp_path: Path) -> None:
    world = World()
    default = ScriptedProvider([])  # never asked: the conversation chose mini
    async with FakeOpenAI() as mini:
        mini.add(Reply(calls=[Call("peek")]), Reply(["Balance is 7, says mini."]))
        async with running(tmp_path / "a", mini, world, default) as (app, channel):
            await app.gateway.handle(_message("/model mini", "e0"))
            await app.gateway.wait_idle()
            assert channel.calls[-1].text == "This conversation now uses mini."
            await app.gateway.handle(_message("balance?"))
            await asyncio.wait_for(world.entered.wait(), 10)  # mini called peek: now "crash"
            snapshot(tmp_path / "a", tmp_path / "b")
        assert len(mini.requests) == 1
        async with running(tmp_path / "b", mini, world, default) as (app, channel):
            await app.gateway.wait_idle()
        assert world.peeks == 2  # the read in flight ran again
        assert len(mini.requests) == 2 and default.requests == []
        sent = mini.requests[1].body["messages"]
        assert sent[-1]["role"] == "tool" and sent[-1]["content"] == "balance 7"
        assert channel.calls[-1].text == "Balance is 7, says mini."
