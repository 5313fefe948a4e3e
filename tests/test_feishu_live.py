"""A Feishu turn is ONE CardKit card: the answer, a panel per specialist, the tools, a stop button.

The real gateway and lark-oapi client against the fake Open API (tests/feishu_fake.py), which
enforces CardKit's rules: a strictly increasing sequence per card, 10 operations a second per
card, card JSON 2.0 element ids and panels, and streaming mode closing 10 minutes (here: less)
after it was last turned on.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.base import ChatRef, InboundMessage
from adapters.feishu import FeishuChannel
from adapters.feishu.live_card import STOP_ACTION
from adapters.feishu.render import to_card_markdown
from agent.providers.scripted import Reply, ScriptedProvider
from bot.pipeline.delivery import Delivery
from bot.runtime.app import App
from tests.agents_kit import SUM, TASK, Probe, Router, dispatch, registry_with, write_personas
from tests.conftest import make_config
from tests.feishu_events import action_event, message_event
from tests.feishu_fake import APP_ID, APP_SECRET, FakeFeishu, Message
from tools.events import AgentFinished, AgentStarted, AnswerDelta, Final, ToolFinished, ToolStarted

CHAT = ChatRef("feishu", "oc_chat")
WAIT_S = 60.0  # a hang guard on a loaded machine, never a speed bound
COORDINATOR = """---
name: default
description: Coordinates the Feishu card test.
tools: [lookup, calc, slow_tool]
---
You coordinate.
"""


@pytest.fixture
async def fake() -> AsyncIterator[FakeFeishu]:
    server = FakeFeishu()
    await server.start()
    yield server
    await server.close()


def app_config(tmp_path: Path, fake: FakeFeishu) -> Any:
    folder = write_personas(tmp_path / "personas")
    (folder / "default.md").write_text(COORDINATOR)
    section = {"enabled": True, "app_id": APP_ID, "app_secret": APP_SECRET, "domain": fake.url}
    return make_config(
        tmp_path,
        channels={"feishu": section, "websocket": {"enabled": False}},
        personas={"dirs": [str(folder)]},
    )


def elements(card: dict[str, Any], tag: str) -> list[dict[str, Any]]:
    return [e for e in card["body"]["elements"] if e["tag"] == tag]


def by_id(card: dict[str, Any], element_id: str) -> dict[str, Any] | None:
    return next((e for e in card["body"]["elements"] if e.get("element_id") == element_id), None)


def shown_cards(fake: FakeFeishu) -> list[dict[str, Any]]:
    """Every whole card the bot wrote: created, then replaced, in order."""
    made = [json.loads(c.body["data"]) for c in fake.of("card_create", ok=True)]
    return made + [json.loads(c.body["card"]["data"]) for c in fake.of("card_update", ok=True)]


def ended(fake: FakeFeishu) -> bool:
    return any(
        json.loads(c.body["settings"])["config"].get("streaming_mode") is False
        for c in fake.of("settings", ok=True)
    )


def the_one_card(fake: FakeFeishu, chat_id: str) -> Message:
    assert len(fake.of("message")) == 1, [c.path for c in fake.of("message")]
    assert len(fake.of("card_create")) == 1
    [message] = fake.bot_messages(chat_id)
    return message


async def test_a_turn_with_two_specialists_and_three_tools_is_one_card(
    tmp_path: Path, fake: FakeFeishu
) -> None:
    probe = Probe()
    answer = "The crew was **Armstrong**, Aldrin and Collins; six times seven is 42."
    router = Router(
        default=[
            Reply(
                calls=[
                    dispatch("specialist-a", TASK, description="moon crew"),
                    dispatch("specialist-b", SUM, description="the product"),
                    ("lookup", {"query": "apollo"}),
                    ("calc", {"expression": "6*7"}),
                    ("lookup", {"query": "crew"}),
                ]
            ),
            Reply(answer, chunks=6, delay_s=0.1),
        ],
        specialist_a=[Reply(calls=[("slow_tool", {})]), Reply("Armstrong, Aldrin, Collins")],
        specialist_b=[Reply("42")],
    )
    config = app_config(tmp_path, fake)
    provider = ScriptedProvider(router)
    async with App(
        config, base_dir=tmp_path, provider=provider, registry=registry_with(probe)
    ) as app:
        await fake.ws.wait_connected()
        await fake.ws.push(
            message_event("moon crew and 6x7?", chat_id="oc_chat", message_id="om_q")
        )
        # while specialist A waits, its panel shows it running (the card's structure changed)
        await fake.wait_for(
            lambda: any(
                "⏳ Fact finder" in p["header"]["title"]["content"]
                for card in shown_cards(fake)
                for p in elements(card, "collapsible_panel")
            ),
            WAIT_S,
        )
        probe.release.set()
        await fake.wait_for(lambda: ended(fake), WAIT_S)
        await app.gateway.wait_idle()

    message = the_one_card(fake, "oc_chat")
    placeholder = json.loads(fake.of("card_create")[0].body["data"])
    stop = by_id(placeholder, "stop")
    assert stop is not None and stop["behaviors"][0]["value"]["action_id"] == STOP_ACTION
    final = fake.card_of(message)
    assert fake.text_of(message) == to_card_markdown(answer)
    titles = [p["header"]["title"]["content"] for p in elements(final, "collapsible_panel")]
    assert sorted(titles) == ["✅ B — the product", "✅ Fact finder — moon crew"], titles
    tools = by_id(final, "tools")
    assert tools is not None and len(tools["content"].splitlines()) == 3
    assert all(line.startswith("✅") for line in tools["content"].splitlines())
    assert by_id(final, "stop") is None  # the button goes with the running turn
    assert not fake.streaming(message)
    assert fake.refused_for_rate() == [] and not [c for c in fake.calls if c.code]
    sequences = [c.body["sequence"] for c in fake.of("content", "settings", "card_update")]
    assert sequences == sorted(set(sequences))


async def test_the_stop_button_stops_a_slow_turn_and_its_card_ends_stopped(
    tmp_path: Path, fake: FakeFeishu
) -> None:
    probe = Probe()
    router = Router(default=[Reply(calls=[("slow_tool", {})])])
    config = app_config(tmp_path, fake)
    provider = ScriptedProvider(router)
    async with App(
        config, base_dir=tmp_path, provider=provider, registry=registry_with(probe)
    ) as app:
        await fake.ws.wait_connected()
        await fake.ws.push(message_event("look it up", chat_id="oc_chat", message_id="om_q"))
        async with asyncio.timeout(WAIT_S):
            await probe.slow_started.wait()
        # the tool's line shows: the card's structure changed, the button still there
        await fake.wait_for(lambda: any(by_id(c, "tools") for c in shown_cards(fake)), WAIT_S)
        [message] = fake.bot_messages("oc_chat")
        stop = by_id(fake.card_of(message), "stop")
        assert stop is not None
        value = stop["behaviors"][0]["value"]
        await fake.ws.push(action_event(value, chat_id="oc_chat", message_id=message.message_id))
        await fake.wait_for(lambda: ended(fake), WAIT_S)
        await app.gateway.wait_idle()

    message = the_one_card(fake, "oc_chat")
    final = fake.card_of(message)
    assert fake.text_of(message) == to_card_markdown("⏹ Stopped.")
    assert by_id(final, "stop") is None and not fake.streaming(message)
    assert probe.cancelled  # the tool in flight was cancelled: the turn really stopped
    assert fake.refused_for_rate() == []


async def test_in_a_group_only_the_user_the_turn_answers_can_stop_it(fake: FakeFeishu) -> None:
    channel = FeishuChannel(app_id=APP_ID, app_secret=APP_SECRET, domain=fake.url)
    channel.groups.put("oc_group", True)
    group = ChatRef("feishu", "oc_group")
    turn = Delivery(channel, group, recipient="ou_asker")
    handle = await turn.start()
    assert handle is not None
    stop = by_id(fake.card_of(fake.bot_messages("oc_group")[0]), "stop")
    assert stop is not None
    value = stop["behaviors"][0]["value"]
    got: asyncio.Queue[InboundMessage] = asyncio.Queue()
    running = asyncio.create_task(channel.run(got.put))
    try:
        await fake.ws.wait_connected()
        for user in ("ou_bystander", "ou_asker"):
            event = action_event(value, chat_id="oc_group", message_id=handle.message_id, user=user)
            await fake.ws.push(event)
        async with asyncio.timeout(WAIT_S):
            pressed = await got.get()
        await asyncio.sleep(0.2)
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    assert pressed.text == "/stop" and pressed.user_id == "ou_asker" and pressed.action is None
    assert pressed.chat == group and pressed.is_group and pressed.command == "stop"
    assert got.empty()  # the bystander's press became nothing


async def stream(turn: Delivery, words: int, pause_s: float) -> str:
    for number in range(words):
        await turn.on_event(AnswerDelta(f"w{number} "))
        await asyncio.sleep(pause_s)
    return " ".join(f"w{number}" for number in range(words))


async def test_streaming_is_renewed_before_feishu_closes_it(fake: FakeFeishu) -> None:
    fake.stream_timeout_s = 2.0  # Feishu: 10 minutes
    channel = FeishuChannel(
        app_id=APP_ID, app_secret=APP_SECRET, domain=fake.url, card_update_interval_s=0.05
    )
    channel.out.stream_renew_s = 0.5  # Feishu: 8 minutes
    turn = Delivery(channel, CHAT, recipient="ou_user")
    await turn.start()
    text = await stream(turn, 50, 0.1)  # two and a half times the stream's life
    await turn.on_event(Final(text))

    message = the_one_card(fake, "oc_chat")
    assert fake.text_of(message) == text and not fake.streaming(message)
    card = fake.cards[str(message.card_id)]
    assert card.timed_out == 0  # never closed by the platform
    assert [c.code for c in fake.of("content")] and all(c.code == 0 for c in fake.of("content"))
    assert channel.out.renewals >= 3
    assert fake.refused_for_rate() == []


async def test_a_stream_the_platform_closed_is_opened_again_and_the_final_lands(
    fake: FakeFeishu,
) -> None:
    fake.stream_timeout_s = 0.6
    channel = FeishuChannel(
        app_id=APP_ID, app_secret=APP_SECRET, domain=fake.url, card_update_interval_s=0.05
    )
    channel.out.stream_renew_s = float("inf")  # no renewal: the stream closes under the turn
    turn = Delivery(channel, CHAT, recipient="ou_user")
    await turn.start()
    await turn.on_event(AgentStarted("t1", "researcher", "a long search"))
    text = await stream(turn, 15, 0.1)
    await asyncio.sleep(0.7)  # quiet past the stream's life: closed now
    await turn.on_event(AnswerDelta(" more"))
    await asyncio.sleep(0.3)
    await turn.on_event(AgentFinished("t1", "researcher", "a long search", "completed"))
    await turn.on_event(Final(text + " more"))

    message = the_one_card(fake, "oc_chat")
    assert fake.text_of(message) == text + " more" and not fake.streaming(message)
    codes = [c.code for c in fake.of("content")]
    assert 300309 in codes  # it did close under the turn
    assert 0 in codes[codes.index(300309) + 1 :]  # and streamed again once opened again
    assert fake.cards[str(message.card_id)].timed_out >= 1
    [panel] = elements(fake.card_of(message), "collapsible_panel")
    assert panel["header"]["title"]["content"].startswith("✅ Researcher")


async def test_a_final_the_card_keeps_refusing_is_not_posted_as_a_second_card(
    fake: FakeFeishu,
) -> None:
    channel = FeishuChannel(
        app_id=APP_ID, app_secret=APP_SECRET, domain=fake.url, card_update_interval_s=0.05
    )
    turn = Delivery(channel, CHAT, recipient="ou_user")
    turn.final_retry_pause_s = 0.01
    await turn.start()
    await turn.on_event(AnswerDelta("almost "))
    await fake.wait_for(lambda: bool(fake.of("content")), WAIT_S)
    fake.refuse["card_update"] = (300302, "card refused for a while")
    finishing = asyncio.create_task(turn.on_event(Final("almost done")))
    # the delivery tries its 5 times and would post a new message; the card takes it then
    await fake.wait_for(lambda: len(fake.of("card_update")) >= 5, WAIT_S)
    del fake.refuse["card_update"]
    async with asyncio.timeout(WAIT_S):
        await finishing

    message = the_one_card(fake, "oc_chat")
    assert fake.text_of(message) == "almost done" and not fake.streaming(message)
    assert by_id(fake.card_of(message), "stop") is None


async def test_a_card_never_takes_more_than_ten_operations_a_second(fake: FakeFeishu) -> None:
    channel = FeishuChannel(
        app_id=APP_ID, app_secret=APP_SECRET, domain=fake.url, card_update_interval_s=0.01
    )
    turn = Delivery(channel, CHAT, recipient="ou_user")
    await turn.start()
    for number in range(40):  # text and steps changing as fast as they can
        await turn.on_event(AnswerDelta(f"w{number} "))
        if number % 4 == 0:
            await turn.on_event(ToolStarted(f"c{number}", "lookup", f"Looking up {number}"))
        if number % 4 == 2:
            await turn.on_event(
                ToolFinished(f"c{number - 2}", "lookup", f"Looking up {number - 2}", True)
            )
        await asyncio.sleep(0.03)
    await turn.on_event(Final("all done"))

    message = the_one_card(fake, "oc_chat")
    assert fake.text_of(message) == "all done"
    assert fake.refused_for_rate() == []  # the fake refuses the 11th operation in a second
    ops = [c.at for c in fake.of("content", "settings", "card_update")]
    assert len(ops) >= 8  # it did update, as often as it may
    assert all(sum(1 for t in ops if start <= t < start + 1.0) <= 10 for start in ops)


async def test_an_answer_too_long_for_one_card_goes_on_in_plain_cards(fake: FakeFeishu) -> None:
    channel = FeishuChannel(
        app_id=APP_ID, app_secret=APP_SECRET, domain=fake.url, card_update_interval_s=0.05
    )
    turn = Delivery(channel, CHAT, recipient="ou_user")
    await turn.start()
    await turn.on_event(AgentStarted("t1", "researcher", "a long search"))
    words = [f"w{number:05d}" for number in range(5000)]  # 35 KB: more than a card holds
    for start in range(0, len(words), 1000):
        await turn.on_event(AnswerDelta(" ".join(words[start : start + 1000]) + " "))
        await asyncio.sleep(0.15)
    await turn.on_event(AgentFinished("t1", "researcher", "a long search", "completed"))
    await turn.on_event(Final(" ".join(words)))

    first, *rest = fake.bot_messages("oc_chat")
    assert rest and " ".join(fake.text_of(m) for m in (first, *rest)).split() == words
    [panel] = elements(fake.card_of(first), "collapsible_panel")
    assert panel["header"]["title"]["content"].startswith("✅ Researcher")
    for later in rest:  # the text alone: the steps and the button belong to the turn's card
        assert not elements(fake.card_of(later), "collapsible_panel")
    made = [json.loads(c.body["data"]) for c in fake.of("card_create")]
    assert [by_id(card, "stop") is not None for card in made] == [True] + [False] * (len(made) - 1)
    assert all(by_id(fake.card_of(m), "stop") is None for m in (first, *rest))
    assert not any(fake.streaming(m) for m in (first, *rest))


async def test_without_the_stop_button_the_card_has_none(fake: FakeFeishu) -> None:
    channel = FeishuChannel(
        app_id=APP_ID, app_secret=APP_SECRET, domain=fake.url, stop_button=False
    )
    turn = Delivery(channel, CHAT, recipient="ou_user")
    await turn.start()
    await turn.on_event(Final("done"))
    message = the_one_card(fake, "oc_chat")
    assert all(by_id(card, "stop") is None for card in shown_cards(fake))
    assert fake.text_of(message) == "done" and not fake.streaming(message)
