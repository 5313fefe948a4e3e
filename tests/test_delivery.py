"""The per-turn placeholder delivery, against a recording fake channel."""

import asyncio
from dataclasses import dataclass, field

import pytest

from adapters.base import ChannelLimits, ChatRef, MessageHandle, OutboundContent
from bot.pipeline.delivery import APOLOGY, PLACEHOLDER, Delivery
from bot.pipeline.textsplit import split_text
from tests.clock import FakeClock
from tests.conftest import eventually
from tests.fakes import RecordingChannel
from tools.events import (
    AgentFinished,
    AgentStarted,
    AnswerDelta,
    AnswerReset,
    Failed,
    Final,
    Interim,
    ToolFinished,
    ToolStarted,
)

CHAT = ChatRef("fake", "c1")


async def test_placeholder_first_then_previews_at_the_channels_cadence_then_final() -> None:
    clock = FakeClock()
    channel = RecordingChannel(ChannelLimits(max_text_length=1000, min_edit_interval_s=0.05), clock)
    delivery = Delivery(channel, CHAT, reply_to="u1", clock=clock, sleep=clock.sleep)
    await delivery.start()
    began = clock()
    for index in range(50):  # the stream: a delta every 2 ms, 100 ms in all
        await delivery.on_event(AnswerDelta(f"w{index} "))
        await clock.advance(0.002)
    await delivery.on_event(Final("the answer"))
    assert [(c.kind, c.text) for c in channel.calls[:1]] == [("send", PLACEHOLDER)]
    edits = [(round(c.at - began, 6), c.text, c.final) for c in channel.calls if c.kind == "edit"]
    # one preview per 50 ms, each showing the newest text: the deltas so far, none skipped
    assert edits == [
        (0.05, "".join(f"w{index} " for index in range(25)), False),
        (0.1, "".join(f"w{index} " for index in range(50)), False),
        (0.1, "the answer", True),
    ]
    assert [c.kind for c in channel.calls].count("send") == 1


async def test_newest_text_wins_and_stale_edits_are_dropped() -> None:
    channel = RecordingChannel(ChannelLimits(max_text_length=1000, min_edit_interval_s=0.0))
    channel.edit_gate = asyncio.Event()
    delivery = Delivery(channel, CHAT)
    await delivery.start()
    await delivery.on_event(AnswerDelta("a"))
    await channel.wait_for(lambda: channel.gated == ["a"])  # the flusher is held in that edit
    await delivery.on_event(AnswerDelta("b"))
    await delivery.on_event(AnswerDelta("c"))
    channel.edit_gate.set()
    await channel.wait_for(lambda: any(c.text == "abc" for c in channel.calls))
    await delivery.on_event(Final("abc!"))
    texts = [c.text for c in channel.calls if c.kind == "edit"]
    assert "ab" not in texts
    assert texts[-1] == "abc!"


async def test_overflow_continues_in_new_messages_in_order() -> None:
    channel = RecordingChannel(ChannelLimits(max_text_length=100, min_edit_interval_s=0.01))
    delivery = Delivery(channel, CHAT)
    await delivery.start()
    answer = " ".join(f"word{index:03d}" for index in range(30))  # 239 characters
    await delivery.on_event(Final(answer))
    sends = [c for c in channel.calls if c.kind == "send"]
    assert len(sends) == 3  # the placeholder, then two continuations
    assert all(c.final for c in sends[1:])
    finals = [c for c in channel.calls if c.final]
    assert " ".join(c.text for c in finals) == answer
    assert all(len(c.text) <= 100 for c in finals)


async def test_rate_limit_pauses_previews_until_it_ends() -> None:
    clock = FakeClock()
    channel = RecordingChannel(ChannelLimits(max_text_length=1000, min_edit_interval_s=0.0), clock)
    channel.rate_limit_next = [0.2]
    delivery = Delivery(channel, CHAT, clock=clock, sleep=clock.sleep)
    await delivery.start()
    began = clock()
    await delivery.on_event(AnswerDelta("partial"))
    await channel.wait_for(lambda: bool(channel.rate_limited))  # the first preview drew a 429
    assert await clock.sleeping() == pytest.approx(0.2)  # the flusher waits the pause out
    await delivery.on_event(AnswerDelta(" more"))
    await clock.advance(0.199)
    assert [c.kind for c in channel.calls] == ["send"], "an edit went out during the 429 pause"
    await clock.advance(0.001)
    await channel.wait_for(lambda: channel.calls[-1].text == "partial more")
    await delivery.on_event(Final("done"))
    edits = [(round(c.at - began, 6), c.text, c.final) for c in channel.calls if c.kind == "edit"]
    assert edits == [(0.2, "partial more", False), (0.2, "done", True)]


async def test_a_final_during_a_rate_limit_pause_waits_it_out_then_lands() -> None:
    clock = FakeClock()
    channel = RecordingChannel(ChannelLimits(max_text_length=1000, min_edit_interval_s=0.0), clock)
    channel.rate_limit_next = [0.2]
    delivery = Delivery(channel, CHAT, clock=clock, sleep=clock.sleep)
    await delivery.start()
    began = clock()
    await delivery.on_event(AnswerDelta("partial"))
    await channel.wait_for(lambda: bool(channel.rate_limited))
    await clock.sleeping()
    await clock.advance(0.15)
    final = asyncio.create_task(delivery.on_event(Final("done")))
    assert await clock.next_sleep() == pytest.approx(0.05)  # the rest of the pause
    assert [c.kind for c in channel.calls] == ["send"]
    await clock.advance(0.05)
    await final
    edits = [(round(c.at - began, 6), c.text, c.final) for c in channel.calls if c.kind == "edit"]
    assert edits == [(0.2, "done", True)]


async def test_failure_edits_an_apology_into_the_placeholder() -> None:
    channel = RecordingChannel()
    delivery = Delivery(channel, CHAT)
    handle = await delivery.start()
    assert handle is not None
    await delivery.on_event(AnswerDelta("half an ans"))
    await delivery.on_event(Failed("provider down"))
    assert channel.texts(handle.message_id)[-1] == APOLOGY
    assert channel.calls[-1].final


async def test_interim_text_and_worker_status_lines_then_final_replaces_them() -> None:
    channel = RecordingChannel(ChannelLimits(max_text_length=1000, min_edit_interval_s=0.0))
    delivery = Delivery(channel, CHAT)
    handle = await delivery.start()
    assert handle is not None
    await delivery.on_event(AgentStarted("t1", "specialist-research", "find flights", "Scout"))
    await channel.wait_for(lambda: "⏳" in channel.texts(handle.message_id)[-1])
    shown = channel.texts(handle.message_id)[-1]
    # the display name, never the internal one
    assert shown.startswith("Asking Scout — one moment") and "⏳ Scout — find flights" in shown
    assert "specialist-research" not in shown
    await delivery.on_event(AgentFinished("t1", "specialist-research", "find flights", "completed"))
    await delivery.on_event(Final("Here is what I found."))
    assert channel.texts(handle.message_id)[-1] == "Here is what I found."


async def test_reset_drops_preamble_and_nothing_after_final() -> None:
    channel = RecordingChannel(ChannelLimits(max_text_length=1000, min_edit_interval_s=0.0))
    delivery = Delivery(channel, CHAT)
    await delivery.start()
    await delivery.on_event(AnswerDelta("Let me check"))
    await delivery.on_event(AnswerReset())
    assert delivery.preview() == PLACEHOLDER
    await delivery.on_event(Final("It is noon."))
    count = len(channel.calls)
    await delivery.on_event(AnswerDelta("late"))
    assert asyncio.all_tasks() == {asyncio.current_task()}  # no flusher is left to send it
    assert len(channel.calls) == count


async def test_after_an_uncertain_continuation_only_the_final_adds_messages() -> None:
    from adapters.base import DeliveryUncertain

    class Flaky(RecordingChannel):
        failed = False

        async def send(
            self,
            chat: ChatRef,
            content: OutboundContent,
            *,
            reply_to: str | None = None,
            final: bool = False,
            recipient: str | None = None,
        ) -> MessageHandle:
            if self.calls and not self.failed:  # the first continuation: did it go out?
                self.failed = True
                raise DeliveryUncertain("timed out")
            return await super().send(chat, content, reply_to=reply_to, final=final)

    @dataclass(frozen=True)
    class Measured(ChannelLimits):
        """Limits that keep each text they measure: a preview that sends nothing still shows."""

        measured: list[str] = field(default_factory=list, compare=False)

        def length(self, text: str) -> int:
            self.measured.append(text)
            return len(text)

    limits = Measured(max_text_length=20, min_edit_interval_s=0.0)
    channel = Flaky(limits)
    delivery = Delivery(channel, CHAT)
    await delivery.start()
    await delivery.on_event(AnswerDelta("0123456789 " * 3))  # needs a second message
    await channel.wait_for(lambda: channel.failed)
    await delivery.on_event(AnswerDelta("more words " * 2))
    # a preview of the new text was laid out, and must not have tried a new message again
    await eventually(lambda: any("more words" in text for text in limits.measured))
    assert len([c for c in channel.calls if c.kind == "send"]) == 1
    final = "0123456789 " * 5
    await delivery.on_event(Final(final))
    sends = [c for c in channel.calls if c.kind == "send"]
    parts = split_text(final, 20)
    assert len(sends) == len(parts) and all(c.final for c in sends[1:])  # each part once


async def test_a_channel_that_cannot_edit_gets_only_the_final_as_new_messages() -> None:
    channel = RecordingChannel(ChannelLimits(max_text_length=10, can_edit=False))
    delivery = Delivery(channel, CHAT, reply_to="u1")
    assert await delivery.start() is None
    await delivery.on_event(AnswerDelta("streamed text"))
    await delivery.on_event(Interim("a note"))
    await delivery.on_event(Final("0123456789abcdef"))
    assert [(c.kind, c.final) for c in channel.calls] == [("send", True), ("send", True)]
    assert "".join(c.text for c in channel.calls) == "0123456789abcdef"


async def test_previews_stop_at_the_edit_cap_and_the_final_still_lands() -> None:
    limits = ChannelLimits(max_text_length=1000, min_edit_interval_s=0.0, max_edits_per_message=3)
    channel = RecordingChannel(limits)
    delivery = Delivery(channel, CHAT)
    await delivery.start()
    text = ""
    for index in range(6):
        text += f"w{index} "
        await delivery.on_event(AnswerDelta(f"w{index} "))
        if index < 2:  # the first two previews go out; then the cap keeps the last edit
            shown = text
            await channel.wait_for(lambda: channel.calls[-1].text == shown)  # noqa: B023
    await asyncio.sleep(0.05)  # room for a preview that must not come (proving an absence)
    await delivery.on_event(Final("done"))
    edits = [c for c in channel.calls if c.kind == "edit"]
    assert len(edits) == 3, [c.text for c in edits]
    assert edits[-1].text == "done" and edits[-1].final
    assert [c.kind for c in channel.calls].count("send") == 1


async def test_the_recipient_reaches_the_channel() -> None:
    seen: list[str | None] = []

    class Recipients(RecordingChannel):
        async def send(self, chat, content, *, reply_to=None, final=False, recipient=None):  # type: ignore[no-untyped-def]
            seen.append(recipient)
            return await super().send(chat, content, reply_to=reply_to, final=final)

    delivery = Delivery(Recipients(), CHAT, recipient="U123")
    await delivery.start()
    await delivery.finish("x" * 250)  # continues in two more messages
    assert seen == ["U123", "U123", "U123"]


async def test_a_preview_never_edits_a_message_whose_text_is_unchanged() -> None:
    """Every edit counts against a cap (Feishu: 20 a message): once the first message of a long
    answer is full, only the one still growing is edited."""
    limits = ChannelLimits(max_text_length=40, min_edit_interval_s=0.0, max_edits_per_message=20)
    channel = RecordingChannel(limits)
    delivery = Delivery(channel, CHAT)
    first = await delivery.start()
    assert first is not None
    full = "The first part is here.\n\n"  # the split is at the paragraph end from here on
    await delivery.on_event(AnswerDelta(full + "Second part, growing"))
    await channel.wait_for(lambda: channel.calls[-1].text == "Second part, growing")
    for more in (" on", " and on", " and on."):
        await delivery.on_event(AnswerDelta(more))
        shown = channel.calls[-1].text + more
        await channel.wait_for(lambda: channel.calls[-1].text == shown)  # noqa: B023
    await delivery.on_event(Final(full + "Second part, growing on and on and on."))
    assert channel.texts(first.message_id) == [PLACEHOLDER, "The first part is here."]
    second = channel.calls[2].message_id
    assert channel.texts(second) == [
        "Second part, growing",
        "Second part, growing on",
        "Second part, growing on and on",
        "Second part, growing on and on and on.",
    ]


async def test_previews_and_the_final_carry_the_turns_steps_in_parts() -> None:
    channel = RecordingChannel(ChannelLimits(max_text_length=1000, min_edit_interval_s=0.0))
    delivery = Delivery(channel, CHAT)
    handle = await delivery.start()
    assert handle is not None
    await delivery.on_event(AgentStarted("t1", "specialist-research", "find flights", "Scout"))
    await delivery.on_event(ToolStarted("c1", "get_time", "Checking the time"))
    await channel.wait_for(lambda: "🔧" in channel.texts(handle.message_id)[-1])
    live = channel.calls[-1].live
    assert live is not None and live.answer == "" and live.note.startswith("Asking Scout")
    assert [(s.id, s.kind, s.title, s.status) for s in live.steps] == [
        ("t1", "agent", "Scout — find flights", "running"),
        ("c1", "tool", "Checking the time", "running"),
    ]
    await delivery.on_event(ToolFinished("c1", "get_time", "Checking the time", ok=False))
    await delivery.on_event(AgentFinished("t1", "specialist-research", "find flights", "completed"))
    await delivery.on_event(AnswerDelta("Two flights"))
    await channel.wait_for(lambda: channel.texts(handle.message_id)[-1] == "Two flights")
    live = channel.calls[-1].live
    assert live is not None and (live.answer, live.note) == ("Two flights", "")
    await delivery.on_event(Final("Two flights found."))
    final = channel.calls[-1]
    assert final.final and final.live is not None
    assert final.live.answer == "Two flights found."
    # ended steps stay, with how they ended: a task card or a panel shows them done
    assert [s.status for s in final.live.steps] == ["completed", "failed"]
