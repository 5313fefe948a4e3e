"""A `bot serve` killed with SIGKILL mid-turn, then started again: the placeholder it left on
"Thinking…" is edited into a short note, and Telegram's redelivery of the same update is not
answered a second time (the event claim is durable in SQLite)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from bot.recovery import INTERRUPTED_BY_CRASH
from tests.telegram_fake import TOKEN, FakeBotAPI

ROOT = Path(__file__).resolve().parent.parent
CHAT = 4242


class StallingModel:
    """An OpenAI-compatible server that takes each request and never answers."""

    def __init__(self) -> None:
        self.requests = 0
        self.arrived = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._stall)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}/v1"

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _stall(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        self.arrived.set()
        await asyncio.Event().wait()  # the model "thinks" until the process is killed
        raise AssertionError("unreachable")


@pytest.fixture
async def servers() -> AsyncIterator[tuple[FakeBotAPI, StallingModel]]:
    fake, model = FakeBotAPI(interval_s=0.05), StallingModel()
    await fake.start()
    await model.start()
    yield fake, model
    await fake.close()
    await model.close()


def _serve(tmp_path: Path, fake: FakeBotAPI, model: StallingModel) -> subprocess.Popen[bytes]:
    config = {
        "server": {"port": 0},
        "storage": {"path": str(tmp_path / "bot.db")},
        "personas": {"dirs": [str(ROOT / "personas")]},
        "llm": {"provider": "openai", "base_url": model.url, "api_key": "test", "max_retries": 0},
        "channels": {
            "telegram": {
                "enabled": True,
                "token": TOKEN,
                "api_base": fake.url,
                "private_edit_interval_s": 0.05,
            }
        },
    }
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps(config))
    with (tmp_path / "serve.log").open("ab") as log:  # the child keeps its own descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "bot", "serve", "--config", str(path)],
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


async def test_a_killed_turn_leaves_no_placeholder_and_no_second_answer(
    tmp_path: Path, servers: tuple[FakeBotAPI, StallingModel]
) -> None:
    fake, model = servers
    update = fake.message(CHAT, "what is the meaning of life?")
    fake.push(update)
    first = _serve(tmp_path, fake, model)
    try:
        await fake.wait_for(lambda: bool(fake.ok(CHAT, "sendMessage")), timeout=30)
        async with asyncio.timeout(30):
            await model.arrived.wait()  # the turn is recorded and the model is working
    finally:
        os.kill(first.pid, signal.SIGKILL)
        await asyncio.to_thread(first.wait)
    placeholder = fake.ok(CHAT, "sendMessage")[0]
    assert placeholder.params["text"] == "Thinking…"
    placeholder_id = placeholder.message_id
    assert placeholder_id is not None

    # Telegram redelivers the unconfirmed update; a new command comes after it.
    fake.push(update)
    fake.push(fake.message(CHAT, "/help"))
    second = _serve(tmp_path, fake, model)
    try:
        await fake.wait_for(lambda: len(fake.ok(CHAT, "sendMessage")) >= 2, timeout=30)
        await fake.wait_for(lambda: bool(fake.ok(CHAT, "editMessageText")), timeout=30)
    finally:
        second.send_signal(signal.SIGINT)
        await asyncio.to_thread(second.wait, 30)
    edits = fake.ok(CHAT, "editMessageText")
    assert [e.params["message_id"] for e in edits] == [placeholder_id]
    assert fake.messages[(CHAT, placeholder_id)] == INTERRUPTED_BY_CRASH
    sends = [c.params["text"] for c in fake.ok(CHAT, "sendMessage")]
    assert sends[0] == "Thinking…" and "Commands" in sends[1]
    assert len(sends) == 2, sends  # the redelivered question got no second placeholder or answer
    assert model.requests == 1
    with sqlite3.connect(tmp_path / "bot.db") as db:
        rows = db.execute("select status from turns").fetchall()
    assert rows == [("failed",)]
