"""Slack answers as Slack receives them: mrkdwn, splits by bytes, Block Kit, errors, the budget.

The real slack_sdk client against the fake Slack; `Delivery` drives the channel as a turn does.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from adapters.base import (
    ChannelError,
    ChatRef,
    DeliveryUncertain,
    MessageGone,
    OutboundContent,
    RateLimited,
)
from adapters.slack import SlackChannel
from bot.ops.metrics import Metrics
from bot.pipeline.delivery import Delivery
from tests.slack_fake import BOT_TOKEN, MAX_TEXT_BYTES, FakeSlack
from tools.display import alert, button, card, confirm
from tools.events import AnswerDelta, Final

THREAD = "1699999999.000100"
CHAT = ChatRef("slack", "C1", THREAD, team_id="T1")


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    slack = FakeSlack()
    await slack.start()
    yield slack
    await slack.close()


@pytest.fixture
async def channel(fake: FakeSlack) -> AsyncIterator[SlackChannel]:
    made = SlackChannel(bot_token=BOT_TOKEN, api_base=fake.url, request_timeout_s=1)
    yield made
    await made.aclose()


async def test_markdown_arrives_as_mrkdwn_escaped_as_slack_escapes(
    fake: FakeSlack, channel: SlackChannel
) -> None:
    markdown = (
        "# Plan\n\n**Bold**, _it_, ~~gone~~, `a<b>&c` and [docs](https://e.com/?a=1&b=2).\n\n"
        "Ping <!channel> & <@U2>; [bad](javascript:alert(1))\n\n> quoted\n\n"
        "```py\nif a < b: pass\n```"
    )
    await channel.send(CHAT, OutboundContent(markdown), final=True)
    [call] = fake.ok("chat.postMessage")
    assert call.params["text"] == (
        "*Plan*\n\n*Bold*, _it_, ~gone~, `a&lt;b&gt;&amp;c` and <https://e.com/?a=1&amp;b=2|docs>.\n\n"
        "Ping &lt;!channel&gt; &amp; &lt;@U2&gt;; [bad](javascript:alert(1))\n\n> quoted\n\n"
        "```\nif a &lt; b: pass\n```"
    )
    assert call.params["thread_ts"] == THREAD and call.params["channel"] == "C1"
    assert call.params["unfurl_links"] is False and call.params["unfurl_media"] is False


async def test_a_long_cjk_answer_continues_in_the_thread_within_slacks_byte_limit(
    fake: FakeSlack, channel: SlackChannel
) -> None:
    answer = "\n\n".join(f"第{i}段：" + "漢字かな交じり文です。" * 40 for i in range(12))
    assert len(answer) < 4000 * 2 < len(answer.encode())  # under 4,000 characters a message
    delivery = Delivery(channel, CHAT, reply_to=THREAD)
    await delivery.start()
    await delivery.on_event(Final(answer))
    shown = fake.thread("C1", THREAD)
    assert len(shown) >= 4 and "".join(shown).replace("\n", "") == answer.replace("\n", "")
    assert all(len(text.encode()) <= MAX_TEXT_BYTES for text in shown)
    assert not [c for c in fake.calls if c.error]  # never a msg_too_long


async def test_display_hints_become_block_kit_beside_the_text(
    fake: FakeSlack, channel: SlackChannel
) -> None:
    hint = card(
        "Order 42",
        {"Amount": "12 USD", "Status": "pending"},
        buttons=[button("Pay", "pay_42", value="42", style="primary"), button("Cancel", "no")],
    )
    handle = await channel.send(CHAT, OutboundContent("Thinking…"))
    await channel.edit(handle, OutboundContent("Here it is.", (hint,)), final=True)
    [update] = fake.ok("chat.update")
    assert update.params["text"] == "Here it is."
    assert update.params["parse"] == "none"  # chat.update's default, "client", links @channel
    kinds = [block["type"] for block in update.params["blocks"]]
    assert kinds == ["section", "header", "section", "actions"]
    [pay, cancel] = update.params["blocks"][-1]["elements"]
    assert pay == {
        "type": "button",
        "text": {"type": "plain_text", "text": "Pay", "emoji": True},
        "action_id": "pay_42",
        "value": "42",
        "style": "primary",
    }
    assert "style" not in cancel and cancel["action_id"] == "no"


async def test_no_text_of_a_display_hint_can_ping_a_channel(
    fake: FakeSlack, channel: SlackChannel
) -> None:
    ping = "<!channel> see <https://evil.example|your bank>"
    hints = (
        card(ping, {ping: ping}, subtitle=ping),
        alert("warning", ping, title=ping),
        confirm(ping, [button(ping, "ok")]),
    )
    handle = await channel.send(CHAT, OutboundContent("Thinking…"))
    await channel.edit(handle, OutboundContent("Here.", hints), final=True)
    [update] = fake.ok("chat.update")
    mrkdwn = [
        part["text"]
        for part in _texts(update.params["blocks"])
        if isinstance(part, dict) and part.get("type") == "mrkdwn"
    ]
    assert len(mrkdwn) == 5  # the subtitle, the field, the alert, the confirm, the answer
    assert all("<" not in text and ">" not in text for text in mrkdwn), mrkdwn


@pytest.mark.parametrize(
    ("error", "raised"),
    [
        ("message_not_found", MessageGone),
        ("cant_update_message", MessageGone),
        ("edit_window_closed", MessageGone),
        ("msg_too_long", ChannelError),
        ("channel_not_found", ChannelError),
    ],
)
async def test_update_errors_map_onto_the_channel_errors(
    fake: FakeSlack, channel: SlackChannel, error: str, raised: type[ChannelError]
) -> None:
    handle = await channel.send(CHAT, OutboundContent("Thinking…"))
    fake.fail_next["chat.update"] = [error]
    with pytest.raises(raised) as caught:
        await channel.edit(handle, OutboundContent("Hello"))
    assert type(caught.value) is raised


async def test_lost_answers_make_a_post_uncertain_but_an_update_retryable(
    fake: FakeSlack, channel: SlackChannel
) -> None:
    fake.hang_next["chat.postMessage"] = 1
    with pytest.raises(DeliveryUncertain):
        await channel.send(CHAT, OutboundContent("once"), final=True)
    handle = await channel.send(CHAT, OutboundContent("Thinking…"))
    fake.garble_next["chat.update"] = 1
    with pytest.raises(ChannelError) as caught:
        await channel.edit(handle, OutboundContent("edited"))
    assert not isinstance(caught.value, DeliveryUncertain)  # an update may simply go again
    assert fake.thread("C1", THREAD) == ["once", "edited"]


async def test_a_ratelimited_update_pauses_the_whole_workspace_for_its_retry_after(
    fake: FakeSlack, channel: SlackChannel
) -> None:
    first = await channel.send(CHAT, OutboundContent("one"))
    other = ChatRef("slack", "C2", "1699999999.000200", team_id="T1")
    second = await channel.send(other, OutboundContent("two"))
    fake.limit_next["chat.update"] = 2
    with pytest.raises(RateLimited) as caught:
        await channel.edit(first, OutboundContent("one, edited"))
    assert caught.value.retry_after == 2
    calls = len(fake.calls)
    with pytest.raises(RateLimited):  # another thread, same workspace: not even asked
        await channel.edit(second, OutboundContent("two, edited"))
    assert len(fake.calls) == calls
    await channel.edit(second, OutboundContent("two, final"), final=True)  # waits it out
    [limited] = fake.ratelimited
    [landed] = fake.ok("chat.update")
    assert landed.at - limited.at >= 2 - 0.05 and landed.params["text"] == "two, final"
    assert channel.counts["ratelimited"] == 1


async def test_twenty_answers_in_one_workspace_share_its_update_budget_without_a_429() -> None:
    """The bench's scenario scaled down: the fake allows 240 updates a minute (burst 5)."""
    fake = FakeSlack(updates_per_minute=240, update_burst=5, posts_per_second=50, post_burst=20)
    await fake.start()
    channel = SlackChannel(
        bot_token=BOT_TOKEN, api_base=fake.url, updates_per_minute=216, edit_interval_s=0.2
    )
    words = [f"word{i} " for i in range(60)]

    async def answer(number: int) -> None:
        chat = ChatRef("slack", f"C{number % 4}", f"1700000000.{number:06d}", team_id="T1")
        delivery = Delivery(channel, chat, reply_to=chat.thread_id)
        await delivery.start()
        for word in words:
            await delivery.on_event(AnswerDelta(word))
            await asyncio.sleep(0.05)
        await delivery.on_event(Final("".join(words).strip() + f" ({number})"))

    try:
        async with asyncio.timeout(30):
            await asyncio.gather(*(answer(n) for n in range(20)))
    finally:
        await channel.aclose()
        await fake.close()
    assert not fake.ratelimited
    finals = {m.text for m in fake.bot_messages()}
    assert finals == {"".join(words).strip() + f" ({n})" for n in range(20)}
    updates = fake.ok("chat.update")
    assert len(updates) >= 20  # every final, plus the previews the budget allowed
    gaps = [b.at - a.at for a, b in itertools.pairwise(updates)]
    assert sum(gaps) / len(gaps) >= 60 / 240 * 0.9  # the workspace's pace, not the answers'


async def test_web_api_calls_and_a_429_are_counted_for_metrics(fake: FakeSlack) -> None:
    metrics = Metrics()
    channel = SlackChannel(
        bot_token=BOT_TOKEN, api_base=fake.url, request_timeout_s=1, calls=metrics
    )
    try:
        handle = await channel.send(CHAT, OutboundContent("one"))
        fake.limit_next["chat.update"] = 2
        with pytest.raises(RateLimited):
            await channel.edit(handle, OutboundContent("one, edited"))
        fake.garble_next["chat.postMessage"] = 1  # a proxy's page, not Slack's JSON
        with pytest.raises(ChannelError):
            await channel.send(CHAT, OutboundContent("two"), final=True)
    finally:
        await channel.aclose()
    samples = {
        (metric.name, tuple(sorted(sample.labels.items()))): sample.value
        for metric in text_string_to_metric_families(metrics.render().decode())
        for sample in metric.samples
    }

    def calls(method: str, outcome: str) -> float | None:
        labels = (("channel", "slack"), ("method", method), ("outcome", outcome))
        return samples.get(("gateway_platform_calls", labels))

    assert calls("chat.postMessage", "ok") == 1
    assert calls("chat.postMessage", "error") == 1
    assert calls("chat.update", "rate_limited") == 1
    assert calls("chat.update", "ok") is None  # the workspace waits: nothing more was asked
    assert samples[("gateway_platform_retry_wait_seconds", (("channel", "slack"),))] == 2


async def test_a_long_card_field_is_cut_to_fit_block_kit(
    fake: FakeSlack, channel: SlackChannel
) -> None:
    hint = card("Report", {"Summary": "word " * 600})
    handle = await channel.send(CHAT, OutboundContent("Thinking…"))
    await channel.edit(handle, OutboundContent("Here.", (hint,)), final=True)
    [update] = fake.ok("chat.update")
    [field] = update.params["blocks"][-1]["fields"]
    assert field["text"].startswith("*Summary*\nword word") and len(field["text"]) <= 2000


async def test_blocks_slack_refuses_leave_the_answer_as_text(
    fake: FakeSlack, channel: SlackChannel
) -> None:
    # Two buttons a tool gave the same action id: Slack refuses the blocks, not the answer.
    hint = card("Pick", buttons=[button("Yes", "pick"), button("No", "pick")])
    delivery = Delivery(channel, CHAT, reply_to=THREAD)
    await delivery.start()
    await delivery.on_event(Final("The answer.", (hint,)))
    assert fake.thread("C1", THREAD) == ["The answer."]
    assert [c.error for c in fake.called("chat.update")] == ["invalid_blocks", None]
    assert fake.ok("chat.update")[0].params["blocks"] == []  # no earlier blocks stay shown


def _texts(value: object) -> Iterator[object]:
    """Every text object inside some Block Kit, however deep."""
    if isinstance(value, dict):
        if "type" in value and "text" in value and isinstance(value["text"], str):
            yield value
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)


async def test_no_start_up_warning_about_a_token_we_never_passed(
    fake: FakeSlack, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Deployments keep SLACK_BOT_TOKEN in the environment, which bolt reads by itself."""
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    with caplog.at_level(logging.WARNING):
        made = SlackChannel(bot_token=BOT_TOKEN, api_base=fake.url, request_timeout_s=1)
    assert made is not None
    assert not [r for r in caplog.records if "will be unused" in r.getMessage()], caplog.text
