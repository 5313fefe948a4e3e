"""A pending approval survives a kill -9: real `bot serve` processes, Telegram and Slack fakes.

A Telegram user asks to pay; `create_payment` waits for approval; the request goes to the
operator Slack channel (`approvals.place`) with the three buttons. The gateway is killed with
SIGKILL and started again; an operator presses Allow once in Slack; the new process resumes the
turn in the same Telegram message: one order, one answer. The same press again does nothing.
In a second run, a Deny from Slack and an expiry each leave no order.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.fake_llm import Call, Reply, llm_config
from tests.fake_openai import FakeOpenAI
from tests.kill_kit import until
from tests.processes import Gateway, one_gateway, write_config
from tests.slack_events import button_press
from tests.slack_fake import APP_TOKEN, BOT_TOKEN, FakeSlack
from tests.telegram_fake import TOKEN, FakeBotAPI

pytestmark = [pytest.mark.process, pytest.mark.timeout(900)]
WAIT_S = 300.0  # hang guards: a `bot serve` start has taken minutes on a loaded 2-core machine
OPS = "C0OPS"
CHAT = 4343
PAY = Call("create_payment", '{"service": "ASSESSMENT", "category": "GENERAL", "method": "CARD"}')
ANSWER = "Your order is made: pay 100.00 USD before it expires."
PERSONA = "---\nname: default\ndescription: Sells.\ntools: [create_payment]\n---\nSell.\n"


@asynccontextmanager
async def fakes() -> AsyncIterator[tuple[FakeBotAPI, FakeSlack, FakeOpenAI]]:
    telegram, slack = FakeBotAPI(interval_s=0.05), FakeSlack()
    await telegram.start()
    await slack.start()
    try:
        async with FakeOpenAI() as model:
            yield telegram, slack, model
    finally:
        await slack.close()
        await telegram.close()


def _config(
    folder: Path, telegram: FakeBotAPI, slack: FakeSlack, model: FakeOpenAI, **approvals: Any
) -> Path:
    personas = folder / "personas"
    personas.mkdir(exist_ok=True)
    (personas / "default.md").write_text(PERSONA)
    return write_config(
        folder,
        personas={"dirs": [str(personas)]},
        llm=llm_config("openai", model, max_retries=0, first_token_timeout_s=120),
        tools={"payment": {"prices": {"ASSESSMENT": {"GENERAL": 100}}}},
        approvals={"place": f"slack:slack/{OPS}", **approvals},
        channels={
            "telegram": {
                "enabled": True,
                "token": TOKEN,
                "api_base": telegram.url,
                "private_edit_interval_s": 0.05,
            },
            "slack": {
                "enabled": True,
                "bot_token": BOT_TOKEN,
                "app_token": APP_TOKEN,
                "api_base": slack.url,
                "edit_interval_s": 0.1,
            },
            "websocket": {"enabled": False},
        },
        log={"level": "DEBUG"},
    )


def _rows(folder: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(folder / "bot.db") as db:
        return db.execute(sql).fetchall()


def _request(slack: FakeSlack) -> tuple[str, dict[str, Any]]:
    """The newest approval request in the operator channel: its ts and its Allow once button."""
    (message,) = [m for m in slack.bot_messages(OPS) if m.blocks][-1:]
    buttons = [
        element
        for block in message.blocks or []
        if block.get("type") == "actions"
        for element in block["elements"]
    ]
    return message.ts, {b["action_id"]: b for b in buttons}


async def _press(slack: FakeSlack, ts: str, button: dict[str, Any]) -> None:
    payload = button_press(
        button["action_id"],
        value=button["value"],
        label=button["text"]["text"],
        channel=OPS,
        message_ts=ts,
        thread_ts=None,
    )
    await slack.push("interactive", payload)


def _ops_text(slack: FakeSlack, ts: str) -> str:
    """What the operator channel's message shows: its text and its blocks."""
    message = next(m for m in slack.bot_messages(OPS) if m.ts == ts)
    return message.text + json.dumps(message.blocks or [], ensure_ascii=False)


def _ops_buttons(slack: FakeSlack, ts: str) -> list[Any]:
    message = next(m for m in slack.bot_messages(OPS) if m.ts == ts)
    return [b for b in message.blocks or [] if b.get("type") == "actions"]


async def _asked(telegram: FakeBotAPI, slack: FakeSlack, folder: Path) -> int:
    """Until the turn waits, asked in Slack; the Telegram live message's id."""
    await slack.wait_for(lambda: any(m.blocks for m in slack.bot_messages(OPS)), WAIT_S)
    await until(lambda: _rows(folder, "select status from turns")[-1:] == [("waiting",)], WAIT_S)
    message_id = telegram.ok(CHAT, "sendMessage")[-1].message_id
    assert message_id is not None
    return message_id


async def _connected(gateway: Gateway, slack: FakeSlack) -> None:
    await slack.wait_for(lambda: slack.connected > 0, WAIT_S)


async def test_approved_in_slack_after_a_kill_and_restart_pays_once_in_the_same_message(
    tmp_path: Path,
) -> None:
    async with fakes() as (telegram, slack, model):
        config = _config(tmp_path, telegram, slack, model)
        model.add(Reply(calls=[PAY]))
        telegram.push(telegram.message(CHAT, "I want to pay for the assessment"))
        async with one_gateway(config, {}) as first:
            message_id = await _asked(telegram, slack, tmp_path)
            first.process.kill()  # SIGKILL: nothing is closed, nothing flushed
            await first.process.wait()
        assert _rows(tmp_path, "select count(*) from orders") == [(0,)]
        ts, buttons = _request(slack)
        assert set(buttons) == {"approval.once", "approval.always", "approval.deny"}
        assert "create_payment" in _ops_text(slack, ts) and "ASSESSMENT" in _ops_text(slack, ts)

        model.add(Reply(text=[ANSWER]))
        async with one_gateway(config, {}) as second:
            await _connected(second, slack)
            await _press(slack, ts, buttons["approval.once"])
            await telegram.wait_for(
                lambda: telegram.messages.get((CHAT, message_id)) == ANSWER, WAIT_S
            )
            await until(
                lambda: _rows(tmp_path, "select status from turns") == [("completed",)], WAIT_S
            )
            await slack.wait_for(lambda: "Allowed once" in _ops_text(slack, ts), WAIT_S)
            assert not _ops_buttons(slack, ts)  # the verdict replaced the buttons
            # the same press again: nothing more happens
            await _press(slack, ts, buttons["approval.once"])
            await until(lambda: second.logged("was decided already") >= 1, WAIT_S)
        assert _rows(tmp_path, "select count(*) from orders") == [(1,)]
        assert len(model.requests) == 2
        assert len(telegram.ok(CHAT, "sendMessage")) == 1  # one live message, edited into it
        ((status, by),) = _rows(tmp_path, "select status, decided_by from approvals")
        assert status == "used" and by.startswith("slack:")
        audited = _rows(tmp_path, "select result from audit_logs where call_id like '%:approval'")
        assert len(audited) == 1 and "once by slack:" in audited[0][0]


async def test_denied_in_slack_or_expired_pays_nothing(tmp_path: Path) -> None:
    async with fakes() as (telegram, slack, model):
        config = _config(tmp_path, telegram, slack, model, timeout_s=300)
        model.add(Reply(calls=[PAY]), Reply(text=["I did not create it."]))
        telegram.push(telegram.message(CHAT, "I want to pay"))
        async with one_gateway(config, {}) as gateway:
            message_id = await _asked(telegram, slack, tmp_path)
            await _connected(gateway, slack)
            ts, buttons = _request(slack)
            await _press(slack, ts, buttons["approval.deny"])
            await telegram.wait_for(
                lambda: telegram.messages.get((CHAT, message_id)) == "I did not create it.",
                WAIT_S,
            )
            await slack.wait_for(lambda: "Denied" in _ops_text(slack, ts), WAIT_S)
        assert _rows(tmp_path, "select count(*) from orders") == [(0,)]

    folder = tmp_path / "expiry"
    folder.mkdir()
    async with fakes() as (telegram, slack, model):
        config = _config(folder, telegram, slack, model, timeout_s=2)
        model.add(Reply(calls=[PAY]), Reply(text=["Nobody approved it."]))
        telegram.push(telegram.message(CHAT, "I want to pay"))
        async with one_gateway(config, {}):
            await slack.wait_for(lambda: any(m.blocks for m in slack.bot_messages(OPS)), WAIT_S)
            await telegram.wait_for(
                lambda: "Nobody approved it." in telegram.messages.values(), WAIT_S
            )
            ts, _ = _request(slack)
            await slack.wait_for(lambda: "Expired" in _ops_text(slack, ts), WAIT_S)
        assert _rows(folder, "select count(*) from orders") == [(0,)]
        assert _rows(folder, "select status, decided_by from approvals") == [("expired", "timeout")]
