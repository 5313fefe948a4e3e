"""A `bot serve` killed with SIGKILL mid-turn, after a payment order was created, then started
again: the turn is resumed into the same Telegram placeholder, the recorded tool result is
replayed (the order is not created twice), the model goes on, and the user gets one answer.
Telegram's redelivery of the same update is not answered a second time (the event claim is
durable in SQLite)."""

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

from tests.fake_llm import Call, Reply, llm_config
from tests.fake_openai import FakeOpenAI
from tests.kill_kit import until
from tests.telegram_fake import TOKEN, FakeBotAPI

# Two `bot serve` starts, each importing the SDKs: on a loaded 2-core machine a start alone has
# taken 20 s, so this test gets more than the suite's minute.
pytestmark = [pytest.mark.process, pytest.mark.timeout(600)]
START_S = 300.0  # a hang guard: starts are slow on a loaded machine
CHAT = 4242
PAY = Call("create_payment", '{"service": "ASSESSMENT", "category": "GENERAL", "method": "CARD"}')
ANSWER = "Your order is ready: pay 100.00 USD with the link before it expires."
PERSONA = """---
name: default
description: Sells assessments.
tools: [create_payment]
---
You sell assessments.
"""


@pytest.fixture
async def servers() -> AsyncIterator[tuple[FakeBotAPI, FakeOpenAI]]:
    fake = FakeBotAPI(interval_s=0.05)
    await fake.start()
    async with FakeOpenAI() as model:
        yield fake, model
    await fake.close()


def _serve(tmp_path: Path, fake: FakeBotAPI, model: FakeOpenAI) -> subprocess.Popen[bytes]:
    personas = tmp_path / "personas"
    personas.mkdir(exist_ok=True)
    (personas / "default.md").write_text(PERSONA)
    config = {
        "server": {"port": 0},
        "storage": {"path": str(tmp_path / "bot.db")},
        "personas": {"dirs": [str(personas)]},
        # the model's deadlines as hang guards only: three test runs beside `stress --cpu 4` on
        # two cores once took the resumed turn's connection past the usual 2 s
        "llm": llm_config(
            "openai",
            model,
            max_retries=0,
            connect_timeout_s=60,
            first_token_timeout_s=60,
            total_timeout_s=120,
        ),
        # create_payment asks for approval first (bot/approvals/): here it is about the call
        "approvals": {"exempt": ["create_payment"]},
        "tools": {
            "payment": {
                "prices": {"ASSESSMENT": {"GENERAL": 100}},
                "provider_url": "https://pay.example/{order_id}",
            }
        },
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


def _rows(tmp_path: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(tmp_path / "bot.db") as db:
        return db.execute(sql).fetchall()


async def test_a_killed_turn_is_resumed_into_its_placeholder_without_paying_twice(
    tmp_path: Path, servers: tuple[FakeBotAPI, FakeOpenAI]
) -> None:
    fake, model = servers
    # the order is created, then the model "thinks" about it until the process is killed
    model.add(Reply(calls=[PAY]), Reply(stall_after=0))
    update = fake.message(CHAT, "I want to pay for the assessment by card")
    fake.push(update)
    first = _serve(tmp_path, fake, model)
    try:
        await model.wait_requests(2, timeout=START_S)
    finally:
        os.kill(first.pid, signal.SIGKILL)
        await asyncio.to_thread(first.wait)
    placeholder = fake.ok(CHAT, "sendMessage")[0]
    assert placeholder.params["text"] == "Thinking…"
    placeholder_id = placeholder.message_id
    assert placeholder_id is not None
    orders = _rows(tmp_path, "select id from orders")
    assert len(orders) == 1
    order_id = str(orders[0][0])

    # Telegram redelivers the unconfirmed update; a new command comes after it.
    model.add(Reply(text=[ANSWER]))
    fake.push(update)
    fake.push(fake.message(CHAT, "/help"))
    second = _serve(tmp_path, fake, model)
    try:
        await fake.wait_for(lambda: fake.messages.get((CHAT, placeholder_id)) == ANSWER, START_S)
        await fake.wait_for(lambda: len(fake.ok(CHAT, "sendMessage")) >= 2, timeout=START_S)
        # the answer's media (the payment's QR code) go after its text: its end is recorded then
        status = "select status from turns"
        await until(lambda: _rows(tmp_path, status) == [("completed",)], START_S)
    finally:
        second.send_signal(signal.SIGINT)
        await asyncio.to_thread(second.wait, START_S)

    assert len(model.requests) == 3
    resumed = model.requests[2].body["messages"]
    tool_results = [m for m in resumed if m["role"] == "tool"]
    assert len(tool_results) == 1 and order_id in tool_results[0]["content"]  # replayed
    assert [m["content"] for m in resumed if m["role"] == "user"] == [update["message"]["text"]]
    assert _rows(tmp_path, "select count(*) from orders") == [(1,)]  # not created twice
    edited = {e.params["message_id"] for e in fake.ok(CHAT, "editMessageText")}
    assert edited == {placeholder_id}
    sends = [c.params["text"] for c in fake.ok(CHAT, "sendMessage")]
    assert sends[0] == "Thinking…" and "Commands" in sends[1]
    assert len(sends) == 2, sends  # the redelivered question got no second placeholder or answer
    assert len(fake.ok(CHAT, "sendPhoto")) == 1  # the QR code, once, after the answer
    assert _rows(tmp_path, "select status, resume_attempts from turns") == [("completed", 1)]
