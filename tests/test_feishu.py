"""The Feishu channel answering: the real lark-oapi client against the fake Open API.

A whole turn through the gateway (long connection in, CardKit streaming card out), then the
channel's rules one by one: the sequence rule, the 20-edit cap of the text fallback, CardKit not
granted, an expired token, rate-limited previews, display hints with buttons coming back as an
action, and the card markdown.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from adapters.base import ChatRef, OutboundContent
from adapters.feishu import FeishuChannel
from adapters.feishu.outbound import clock_sequence
from adapters.feishu.render import to_card_markdown
from adapters.markdown import parse
from agent.providers.scripted import Reply, ScriptedProvider
from bot.ops.metrics import Metrics
from bot.pipeline.delivery import Delivery
from bot.runtime.app import App
from bot.runtime.config import ConfigError
from tests.conftest import make_config
from tests.feishu_events import ENCRYPT_KEY, TOKEN, action_event, message_event, signed
from tests.feishu_fake import APP_ID, APP_SECRET, FakeFeishu
from tools.display import button, card
from tools.events import AgentFinished, AgentStarted, AnswerDelta, Final

CHAT = ChatRef("feishu", "oc_chat")
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
async def fake() -> AsyncIterator[FakeFeishu]:
    server = FakeFeishu()
    await server.start()
    yield server
    await server.close()


def channel_on(fake: FakeFeishu, **settings: Any) -> FeishuChannel:
    return FeishuChannel(app_id=APP_ID, app_secret=APP_SECRET, domain=fake.url, **settings)


async def test_a_turn_streams_into_one_card_that_ends_with_streaming_off(
    tmp_path: Path, fake: FakeFeishu
) -> None:
    answer = " ".join(f"**word{i}**" if i % 40 == 0 else f"word{i}" for i in range(160))
    provider = ScriptedProvider([Reply(answer, chunks=8, delay_s=0.25)])
    section = {"enabled": True, "app_id": APP_ID, "app_secret": APP_SECRET, "domain": fake.url}
    config = make_config(tmp_path, channels={"feishu": section, "websocket": {"enabled": False}})
    async with App(config, base_dir=tmp_path, provider=provider) as app:
        await fake.ws.wait_connected()
        await fake.ws.push(message_event("tell me", chat_id="oc_chat", message_id="om_q"))
        await provider.wait_requests(1)
        try:  # a generous deadline: the answer itself takes 2 s, the machine may be busy
            await fake.wait_for(lambda: bool(fake.of("settings")), 30)
        except TimeoutError:
            raise AssertionError([(c.kind, c.code, round(c.at, 2)) for c in fake.calls]) from None
        await app.gateway.wait_idle()

    [created] = fake.of("card_create")
    assert json.loads(created.body["data"])["config"]["streaming_mode"] is True
    [reply] = fake.of("message")
    assert reply.path == "/open-apis/im/v1/messages/om_q/reply" and reply.body["uuid"]
    card_id = json.loads(reply.body["content"])["data"]["card_id"]
    [message] = fake.bot_messages("oc_chat")
    assert fake.text_of(message) == to_card_markdown(answer) and "**word0**" in fake.text_of(
        message
    )
    assert not fake.streaming(message)  # the chat list no longer says "generating…"
    updates = fake.of("content", "settings")
    assert all(c.code == 0 for c in updates) and updates[-1].kind == "settings"
    sequences = [c.body["sequence"] for c in updates]
    assert sequences == sorted(set(sequences)) and fake.cards[card_id].sequence == sequences[-1]
    streamed = [c.body["content"] for c in fake.of("content")]
    assert len(streamed) >= 3 and any(len(s) < len(streamed[-1]) for s in streamed)  # it grew
    assert all(b.at - a.at >= 0.5 for a, b in itertools.pairwise(fake.of("content")))
    assert app.channels["feishu"].health()["feishu"]["rate_limited"] == 0  # type: ignore[attr-defined]


async def test_a_stale_sequence_jumps_past_the_one_the_card_has(fake: FakeFeishu) -> None:
    channel = channel_on(fake, card_update_interval_s=0)
    handle = await channel.send(CHAT, OutboundContent("Thinking…"))
    card_id = str(handle.data["card_id"])
    # another process updated it in bursts, running ahead of the clock-seeded sequence
    fake.cards[card_id].sequence = clock_sequence() + 500
    await channel.edit(handle, OutboundContent("Hello"), final=True)
    assert [c.code for c in fake.of("content")] == [300317, 0]
    assert fake.text_of(fake.bot_messages("oc_chat")[0]) == "Hello"
    assert not fake.cards[card_id].streaming


async def test_text_fallback_keeps_to_twenty_edits_and_the_final_lands(fake: FakeFeishu) -> None:
    channel = channel_on(fake, streaming="text", text_edit_interval_s=0.01)
    limits = channel.limits_for(CHAT)
    assert limits.max_edits_per_message == 20
    turn = Delivery(channel, CHAT, limits=limits)
    await turn.start()
    for number in range(60):
        await turn.on_event(AnswerDelta(f"w{number} "))
        await asyncio.sleep(0.02)
    final = " ".join(f"w{number}" for number in range(60))
    await turn.on_event(Final(final))
    [message] = fake.bot_messages("oc_chat")
    assert message.msg_type == "post" and fake.text_of(message) == final
    assert message.edits <= 20 and not [c for c in fake.of("edit") if c.code]
    assert len(fake.of("edit")) >= 10  # it did stream


async def test_without_cardkit_the_answer_is_a_text_message_edited(fake: FakeFeishu) -> None:
    fake.refuse["card_create"] = (
        99991672,
        "Access denied: the scope cardkit:card:write is required",
    )
    channel = channel_on(fake)
    handle = await channel.send(CHAT, OutboundContent("Thinking…"))
    await channel.edit(handle, OutboundContent("Done"), final=True)
    [message] = fake.bot_messages("oc_chat")
    assert message.msg_type == "post" and fake.text_of(message) == "Done"
    assert channel.limits_for(CHAT).max_edits_per_message == 20  # later turns know it
    await channel.send(CHAT, OutboundContent("Thinking…"))
    assert len(fake.of("card_create")) == 1  # not asked again


async def test_an_expired_token_is_renewed_and_the_send_posts_once(fake: FakeFeishu) -> None:
    channel = channel_on(fake)
    await channel.send(CHAT, OutboundContent("one"), final=True)
    fake._tokens.clear()  # the platform expired every token
    await channel.send(CHAT, OutboundContent("two"), final=True)
    assert len(fake.of("token")) == 2
    assert [fake.text_of(m) for m in fake.bot_messages("oc_chat")] == ["one", "two"]
    first, refused, retried = (c.body["uuid"] for c in fake.of("message"))
    assert refused == retried != first  # a retry is the same send: Feishu posts it once


async def test_a_rate_limited_preview_is_skipped_and_the_final_lands(fake: FakeFeishu) -> None:
    channel = channel_on(fake, card_update_interval_s=0.05)
    turn = Delivery(channel, CHAT)
    await turn.start()
    fake.force_429["content"] = 2
    for word in ["a", "b", "c", "d", "e", "f"]:
        await turn.on_event(AnswerDelta(word + " "))
        await asyncio.sleep(0.1)
    await turn.on_event(Final("all done"))
    assert [c.code for c in fake.of("content")][:2] == [99991400, 99991400]
    assert fake.text_of(fake.bot_messages("oc_chat")[0]) == "all done"
    assert fake.of("settings")[-1].code == 0 and len(fake.bot_messages("oc_chat")) == 1


async def test_display_hints_become_buttons_whose_press_returns_to_the_thread(
    fake: FakeFeishu,
) -> None:
    channel = channel_on(fake)
    chat = ChatRef("feishu", "oc_chat", "omt_topic")
    channel.groups.put("oc_chat", True)
    handle = await channel.send(chat, OutboundContent("Thinking…"), reply_to=None)
    hint = card(
        "Order 42",
        {"Total": "€ 12"},
        buttons=[button("Pay now", "pay", value="42", style="primary"), button("Cancel", "cancel")],
    )
    await channel.edit(handle, OutboundContent("Your order", display=(hint,)), final=True)
    entity = fake.cards[str(handle.data["card_id"])]
    assert not entity.streaming and fake.of("card_update", "settings")[-1].kind == "settings"
    elements = entity.card["body"]["elements"]
    buttons = [e for e in elements if e["tag"] == "button"]
    assert [b["text"]["content"] for b in buttons] == ["Pay now", "Cancel"]
    assert any("**Total**: € 12" in e.get("content", "") for e in elements)
    value = buttons[0]["behaviors"][0]["value"]

    got: asyncio.Queue[Any] = asyncio.Queue()
    running = asyncio.create_task(channel.run(got.put))
    try:
        await fake.ws.wait_connected()
        await fake.ws.push(action_event(value, chat_id="oc_chat", message_id=handle.message_id))
        async with asyncio.timeout(10):
            pressed = await got.get()
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    assert pressed.chat == chat and pressed.is_group
    assert pressed.action.action_id == "pay" and pressed.action.value == "42"
    assert pressed.action.label == "Pay now" and pressed.action.message_id == handle.message_id


def test_card_markdown_keeps_formatting_and_escapes_literal_markup() -> None:
    text = "**bold** _it_ ~~gone~~ `a*b` [site](https://x.io) [bad](javascript:alert(1)) 2*3 <b>"
    assert to_card_markdown(text) == (
        "**bold** *it* ~~gone~~ `a*b` [site](https://x.io) &#91;bad&#93;(javascript:alert(1))"
        " 2&#42;3 &lt;b&gt;"
    )
    assert to_card_markdown("```py\nx = 1\n```") == "```py\nx = 1\n```"
    assert to_card_markdown("> quoted\n> more") == "> quoted\n> more"


def test_a_code_block_cannot_close_its_fence_early_and_mention_everyone() -> None:
    # The model's code holds a line of four backticks, then a tag that would @ the whole chat.
    code = "````\n<at id=all></at>\n```\nstill code"
    rendered = to_card_markdown(f"`````\n{code}\n`````")
    [block] = parse(rendered).children  # read back, it is one fence holding all of it
    assert block.type == "fence" and block.content == code + "\n"


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ({"enabled": True}, "channels.feishu.app_id"),
        ({"enabled": True, "app_id": "cli_x"}, "channels.feishu.app_secret"),
        ({"enabled": True, "app_id": "x", "app_secret": "s"}, "channels.feishu.app_id"),
        ({"domain": "http://feishu.example.com"}, "channels.feishu.domain"),
        (
            {"enabled": True, "app_id": "cli_x", "app_secret": "s", "mode": "webhook"},
            "channels.feishu.encrypt_key",
        ),
        ({"mode": "socket"}, "channels.feishu.mode"),
    ],
)
def test_bad_config_is_one_line_naming_the_key(
    tmp_path: Path, section: dict[str, Any], key: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        make_config(tmp_path, channels={"feishu": section})
    message = str(caught.value)
    assert "\n" not in message and f": {key}: " in message, message


async def test_webhook_mode_answers_on_the_shared_server(tmp_path: Path, fake: FakeFeishu) -> None:
    provider = ScriptedProvider([Reply("Hello from the webhook")])
    section = {
        "enabled": True,
        "app_id": APP_ID,
        "app_secret": APP_SECRET,
        "domain": fake.url,
        "mode": "webhook",
        "encrypt_key": ENCRYPT_KEY,
        "verification_token": TOKEN,
    }
    config = make_config(tmp_path, channels={"feishu": section})
    async with App(config, base_dir=tmp_path, provider=provider) as app:
        await fake.wait_for(lambda: bool(fake.of("bot")))
        fake.user_message("oc_web", "hi", message_id="om_w")
        body, headers = signed(message_event("hi", chat_id="oc_web", message_id="om_w"))
        async with aiohttp.ClientSession() as session:
            url = f"{app.url}/feishu/events"
            async with session.post(url, data=body, headers=headers) as response:
                assert response.status == 200
            await fake.wait_for(lambda: bool(fake.of("settings")))
            async with session.get(f"{app.url}/healthz") as response:
                health = await response.json()
        await app.gateway.wait_idle()
    [message] = fake.bot_messages("oc_web")
    assert fake.text_of(message) == "Hello from the webhook" and not fake.streaming(message)
    assert health["feishu"]["mode"] == "webhook" and health["feishu"]["stopped"] is None


@pytest.mark.process
def test_bot_serve_with_a_bad_feishu_section_exits_2_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("channels:\n  feishu: {enabled: true}\n")
    result = subprocess.run(
        [sys.executable, "-m", "bot", "serve"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "FEISHU_APP_ID": "cli_a1"},
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert "channels.feishu.app_secret: required" in lines[0] and "FEISHU_APP_SECRET" in lines[0]


async def test_specialists_at_work_show_in_the_card_while_it_streams(fake: FakeFeishu) -> None:
    channel = channel_on(fake, card_update_interval_s=0.05)
    turn = Delivery(channel, CHAT)
    await turn.start()
    await turn.on_event(AgentStarted("t1", "researcher", "looks up prices"))
    await fake.wait_for(
        lambda: any("Researcher" in c.body["card"]["data"] for c in fake.of("card_update"))
    )
    await turn.on_event(AgentFinished("t1", "researcher", "looks up prices", "completed"))
    await turn.on_event(Final("Prices found"))
    [message] = fake.bot_messages("oc_chat")
    running = json.loads(fake.of("card_update")[0].body["card"]["data"])
    [panel] = [e for e in running["body"]["elements"] if e["tag"] == "collapsible_panel"]
    assert panel["header"]["title"]["content"] == "⏳ Researcher — looks up prices"
    [panel] = [
        e for e in fake.card_of(message)["body"]["elements"] if e["tag"] == "collapsible_panel"
    ]
    assert panel["header"]["title"]["content"] == "✅ Researcher — looks up prices"
    assert fake.text_of(message) == "Prices found"  # the panel, not a line under the answer
    assert not fake.streaming(message)


async def test_the_token_is_fetched_without_blocking_the_event_loop(fake: FakeFeishu) -> None:
    fake.token_delay_s = 1.0
    channel = channel_on(fake)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.05)
            ticks += 1

    ticker = asyncio.create_task(tick())
    try:
        await channel.send(CHAT, OutboundContent("hello"), final=True)
    finally:
        ticker.cancel()
    assert ticks >= 10  # the loop went on while the token came (a blocking fetch allows none)
    assert len(fake.of("token")) == 1


async def test_open_api_calls_and_429s_are_counted_for_metrics(fake: FakeFeishu) -> None:
    metrics = Metrics()
    channel = channel_on(fake, card_update_interval_s=0.05, calls=metrics)
    turn = Delivery(channel, CHAT)
    await turn.start()
    fake.force_429["content"] = 1
    await turn.on_event(AnswerDelta("a "))
    await asyncio.sleep(0.1)
    await turn.on_event(Final("all done"))
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(metrics.render().decode())
        for s in family.samples
    }
    calls = {
        (labels["method"], labels["outcome"]): value
        for (name, pairs), value in samples.items()
        if name == "gateway_platform_calls_total"
        for labels in [dict(pairs)]
    }
    limited = [key for key in calls if key[1] == "rate_limited"]
    assert len(limited) == 1 and calls[limited[0]] == 1
    assert ":" in limited[0][0] or "/" in limited[0][0]  # the path template, no ids
    assert not any("oc_chat" in method for method, _ in calls)  # no chat id in a label
    assert sum(v for (m, o), v in calls.items() if o == "ok") >= 3  # token, card, send, ...
    assert samples[("gateway_platform_rate_limited_total", (("channel", "feishu"),))] == 1


async def test_a_card_whose_last_preview_is_the_final_still_ends_streaming_once(
    fake: FakeFeishu,
) -> None:
    """The close is its own call: a final equal to the last preview must still send it."""
    channel = channel_on(fake, card_update_interval_s=0.01)
    turn = Delivery(channel, CHAT)
    await turn.start()
    await turn.on_event(AnswerDelta("All done"))
    await fake.wait_for(lambda: any(c.body["content"] == "All done" for c in fake.of("content")))
    await turn.on_event(Final("All done"))
    [message] = fake.bot_messages("oc_chat")
    assert not fake.streaming(message) and fake.text_of(message) == "All done"
    assert [c.code for c in fake.of("settings")] == [0]  # exactly once
    assert [c.body["content"] for c in fake.of("content")] == ["All done"]  # not written twice
