"""Approval buttons on every channel with buttons, through the real SDK clients and the fakes.

Telegram: an inline keyboard whose press (a `callback_query`) answers the request; the same
live message then carries the answer, its keyboard gone. Slack (Block Kit), Feishu (a card) and
the widget render the same `confirm` hint (tests/test_approvals.py covers the widget's press).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent.providers.scripted import Reply, ScriptedProvider
from bot.approvals.prompt import buttons_hint
from bot.runtime.app import App
from tests.conftest import db_rows, make_config
from tests.feishu_events import action_event, message_event
from tests.feishu_fake import APP_ID, APP_SECRET, FakeFeishu
from tests.telegram_fake import TOKEN, FakeBotAPI

PAY = ("create_payment", {"service": "ASSESSMENT", "category": "QMAS", "method": "CARD"})
PERSONA = "---\nname: default\ndescription: Sells.\ntools: [create_payment]\n---\nSell.\n"
INTERVAL = 0.05
WAIT_S = 30.0


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotAPI]:
    api = FakeBotAPI(interval_s=INTERVAL)
    await api.start()
    yield api
    await api.close()


async def _telegram_app(tmp_path: Path, fake: FakeBotAPI, provider: ScriptedProvider) -> App:
    folder = tmp_path / "personas"
    folder.mkdir(exist_ok=True)
    (folder / "default.md").write_text(PERSONA)
    channel = {
        "enabled": True,
        "token": TOKEN,
        "api_base": fake.url,
        "private_edit_interval_s": INTERVAL,
        "group_edit_interval_s": INTERVAL,
    }
    config = make_config(
        tmp_path,
        channels={"telegram": channel},
        personas={"dirs": [str(folder)]},
        tools={"payment": {"currency": "CNY", "prices": {"ASSESSMENT": {"QMAS": 99}}}},
    )
    app = App(config, base_dir=tmp_path, provider=provider)
    await app.__aenter__()
    await fake.wait_for(lambda: any(c.method == "getupdates" for c in fake.calls))
    return app


def _keyboard(fake: FakeBotAPI, chat: int, message_id: int) -> list[dict[str, Any]]:
    markup = fake.markups.get((chat, message_id)) or {}
    return [button for row in markup.get("inline_keyboard", []) for button in row]


async def test_telegram_inline_keyboard_press_runs_the_payment_in_the_same_message(
    tmp_path: Path, fake: FakeBotAPI
) -> None:
    provider = ScriptedProvider([Reply(calls=[PAY]), Reply("Order made.")])
    app = await _telegram_app(tmp_path, fake, provider)
    try:
        fake.push(fake.message(42, "I want to pay"))
        await fake.wait_for(lambda: bool(fake.ok(42, "sendMessage")), WAIT_S)
        message_id = fake.ok(42, "sendMessage")[0].message_id
        assert message_id is not None
        await fake.wait_for(lambda: len(_keyboard(fake, 42, message_id)) == 3, WAIT_S)
        buttons = _keyboard(fake, 42, message_id)
        assert [b["text"] for b in buttons] == ["Allow once", "Always allow", "Deny"]
        assert "ASSESSMENT" in fake.messages[(42, message_id)]
        assert db_rows(app, "select count(*) from orders") == [(0,)]
        fake.push(fake.press(42, message_id, buttons[0]["callback_data"]))
        await fake.wait_for(lambda: fake.messages[(42, message_id)] == "Order made.", WAIT_S)
        await app.gateway.wait_idle()
        assert db_rows(app, "select count(*) from orders") == [(1,)]
        assert not _keyboard(fake, 42, message_id)  # the answer took the buttons away
        assert len(fake.ok(42, "sendMessage")) == 1  # one live message, edited
        assert any(c.method == "answercallbackquery" for c in fake.calls)
        # the same press again (Telegram redelivers, a double tap): nothing more
        fake.push(fake.press(42, message_id, buttons[0]["callback_data"]))
        await fake.wait_for(
            lambda: sum(c.method == "answercallbackquery" for c in fake.calls) == 2, WAIT_S
        )
        await app.gateway.wait_idle()
        assert db_rows(app, "select count(*) from orders") == [(1,)]
        assert len(provider.requests) == 2
    finally:
        await app.stop()


def test_slack_renders_the_three_buttons_as_block_kit() -> None:
    from adapters.slack.render import blocks

    hint = buttons_hint("en", "Approval needed: create_payment", "a1b2")
    made = blocks("Approval needed", (hint,))
    (actions,) = [b for b in made if b["type"] == "actions"]
    assert [(e["action_id"], e["value"], e["text"]["text"]) for e in actions["elements"]] == [
        ("approval.once", "a1b2", "Allow once"),
        ("approval.always", "a1b2", "Always allow"),
        ("approval.deny", "a1b2", "Deny"),
    ]
    assert [e.get("style") for e in actions["elements"]] == ["primary", None, "danger"]


def test_feishu_renders_the_three_buttons_on_a_card() -> None:
    from adapters.feishu.cards import card_json

    hint = buttons_hint("de", "Freigabe nötig", "a1b2")
    made = json.loads(card_json("Freigabe nötig", streaming=False, hints=(hint,)))
    values = [_feishu_buttons(made)]
    assert values == [
        [
            ("approval.once", "a1b2", "Einmal erlauben"),
            ("approval.always", "a1b2", "Immer erlauben"),
            ("approval.deny", "a1b2", "Ablehnen"),
        ]
    ]


def _feishu_buttons(node: Any) -> list[tuple[str, str, str]]:
    found: list[tuple[str, str, str]] = []
    if isinstance(node, dict):
        if node.get("tag") == "button":
            value = node["behaviors"][0]["value"]
            found.append((value["action_id"], value["value"], node["text"]["content"]))
        for child in node.values():
            found.extend(_feishu_buttons(child))
    elif isinstance(node, list):
        for child in node:
            found.extend(_feishu_buttons(child))
    return found


async def test_feishu_card_buttons_press_runs_the_payment_in_the_same_card(
    tmp_path: Path,
) -> None:
    feishu = FakeFeishu()
    await feishu.start()
    folder = tmp_path / "personas"
    folder.mkdir()
    (folder / "default.md").write_text(PERSONA)
    provider = ScriptedProvider([Reply(calls=[PAY]), Reply("Order made.")])
    section = {"enabled": True, "app_id": APP_ID, "app_secret": APP_SECRET, "domain": feishu.url}
    config = make_config(
        tmp_path,
        channels={"feishu": section, "websocket": {"enabled": False}},
        personas={"dirs": [str(folder)]},
        tools={"payment": {"currency": "CNY", "prices": {"ASSESSMENT": {"QMAS": 99}}}},
    )
    try:
        async with App(config, base_dir=tmp_path, provider=provider) as app:
            await feishu.ws.wait_connected()
            await feishu.ws.push(message_event("pay", chat_id="oc_chat", message_id="om_q"))
            await feishu.wait_for(lambda: len(_card_buttons(feishu)) == 3, WAIT_S)
            buttons = _card_buttons(feishu)
            labels = [b["text"]["content"] for b in buttons]
            assert labels == ["Allow once", "Always allow", "Deny"]
            [message] = feishu.bot_messages("oc_chat")
            value = buttons[0]["behaviors"][0]["value"]
            await feishu.ws.push(
                action_event(value, chat_id="oc_chat", message_id=message.message_id)
            )
            await feishu.wait_for(lambda: feishu.text_of(message) == "Order made.", WAIT_S)
            await app.gateway.wait_idle()
            assert db_rows(app, "select count(*) from orders") == [(1,)]
            assert not _card_buttons(feishu)  # the answer's card has no buttons left
            assert len(feishu.bot_messages("oc_chat")) == 1  # one card, updated in place
    finally:
        await feishu.close()


def _card_buttons(feishu: FakeFeishu) -> list[dict[str, Any]]:
    cards = [entity.card for entity in feishu.cards.values()]
    return [e for c in cards for e in c["body"]["elements"] if e.get("tag") == "button"]
