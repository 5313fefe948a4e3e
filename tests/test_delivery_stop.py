"""A stopped turn's delivery: what the answer showed stays, marked stopped, and once the turn
is stopped the work's ending (tools and specialists cancelled) sends no more previews."""

from __future__ import annotations

import asyncio

from adapters.base import ChannelLimits, ChatRef
from bot.pipeline.delivery import Delivery
from tests.fakes import RecordingChannel
from tools.events import AgentFinished, AgentStarted, AnswerDelta, Interim

CHAT = ChatRef("fake", "c1")
MARK = "⏹ Stopped."


def channel() -> RecordingChannel:
    return RecordingChannel(ChannelLimits(max_text_length=1000, min_edit_interval_s=0.0))


async def test_a_stopped_answer_keeps_its_streamed_text_with_the_mark() -> None:
    fake = channel()
    delivery = Delivery(fake, CHAT)
    await delivery.start()
    await delivery.on_event(AnswerDelta("Half an "))
    await delivery.on_event(AnswerDelta("answer "))
    await fake.wait_for(lambda: fake.shown() == ["Half an answer "])
    await delivery.finish_stopped(MARK)
    last = fake.calls[-1]
    assert (last.text, last.final, last.stopped) == (f"Half an answer\n\n{MARK}", True, True)


async def test_a_stopped_answer_keeps_its_last_note_else_only_the_mark() -> None:
    fake = channel()
    delivery = Delivery(fake, CHAT)
    await delivery.start()
    await delivery.on_event(Interim("Looking it up…"))
    await delivery.finish_stopped(MARK)
    assert fake.shown() == [f"Looking it up…\n\n{MARK}"]

    fake = channel()
    delivery = Delivery(fake, CHAT)
    await delivery.start()
    await delivery.on_event(AgentStarted("t1", "specialist-research", "find it"))
    await delivery.finish_stopped(MARK)  # the placeholder and status lines are not kept
    assert fake.shown() == [MARK] and fake.calls[-1].stopped


async def test_no_preview_goes_out_once_the_turn_is_stopped() -> None:
    fake = channel()
    stopped = False
    delivery = Delivery(fake, CHAT, stopped=lambda: stopped)
    await delivery.start()
    await delivery.on_event(AgentStarted("t1", "specialist-research", "find it"))
    await fake.wait_for(lambda: len(fake.calls) == 2)  # the placeholder, its status line
    stopped = True
    await delivery.on_event(AgentFinished("t1", "specialist-research", "find it", "killed"))
    await delivery.on_event(AnswerDelta("late"))
    for _ in range(20):  # the flusher's turns on the loop: a preview would go out in them
        await asyncio.sleep(0)
    await delivery.finish_stopped(MARK)
    assert [(c.kind, c.final) for c in fake.calls] == [
        ("send", False),
        ("edit", False),
        ("edit", True),
    ]
