"""Handoff to a person, end to end: a Telegram user, operators in a Slack channel (both fakes),
the real gateway and its store. The model asks for a person; the switch waits for its final;
the user's messages reach the operators' thread and never the model; an operator's reply
reaches Telegram once, labelled; on release the model runs again with the marker; a restart
keeps the state; two operators pressing Take: one wins."""

from __future__ import annotations

import asyncio

from agent.providers.scripted import Reply, ScriptedProvider
from bot.handoff.model import AlreadyTaken, Operator
from tests.conftest import db_rows
from tests.handoff_kit import OPS, Desk, desk, until  # noqa: F401

__all__ = ["desk"]

REASON = "refund over the limit"
SUMMARY = "Wants a refund of 300 EUR for order 17; over what I may approve."
FINAL = "I'm passing you to a colleague who can approve this."


def handoff_row(desk: Desk) -> tuple[str, str, str | None]:
    [(handoff_id, status, thread)] = db_rows(
        desk.apps[-1], "select id, status, thread from handoffs order by requested_at desc limit 1"
    )
    return handoff_id, status, thread


def asked(desk: Desk) -> bool:
    """The request is posted to the desk and its thread recorded: the row gets the thread once
    Slack has answered the post, a moment after the fake shows it."""
    threads = db_rows(desk.apps[-1], "select thread from handoffs")
    return len(desk.parents()) == 1 and len(threads) == 1 and threads[0][0] is not None


async def test_telegram_to_slack_and_back_with_the_marker(desk: Desk) -> None:
    provider = ScriptedProvider(
        [
            Reply(calls=[("transfer_to_human", {"reason": REASON, "summary": SUMMARY})]),
            Reply(FINAL),
            Reply("Your refund is approved, as my colleague said. Anything else?"),
        ]
    )
    app = await desk.start(provider)
    await desk.user_says("I want my 300 EUR back for order 17")
    await desk.user_sees("asked a person to take over")
    sent = desk.sent_to_user()
    # the final reply went out before the switch's notice: the notice is the last message
    final_at = next(i for i, t in enumerate(desk.user_texts()) if FINAL in t)
    notice_at = next(i for i, t in enumerate(desk.user_texts()) if "asked a person" in t)
    assert final_at < notice_at, desk.user_texts()
    assert sent

    await until(lambda: asked(desk))
    [parent] = desk.parents()
    handoff_id, status, thread = handoff_row(desk)
    assert status == "waiting" and thread == parent.ts
    assert REASON in parent.text
    blocks = str(parent.blocks)
    assert SUMMARY in blocks and "handoff.take" in blocks and "telegram" in blocks

    # the thread opens with the conversation so far
    await until(lambda: bool(desk.thread(parent.ts)))
    recap = desk.thread(parent.ts)[0]
    assert "Earlier in this conversation" in recap
    assert "300 EUR back for order 17" in recap and FINAL in recap

    # the user writes while waiting: held, relayed to the thread, no model call
    await desk.user_says("Hello? Is someone there?")
    await until(lambda: any("Is someone there?" in t for t in desk.thread(parent.ts)))
    assert len(provider.requests) == 2

    await desk.press("handoff.take", handoff_id, parent.ts)
    await desk.user_sees("ana has joined")
    await until(lambda: handoff_row(desk)[1] == "human")
    await until(lambda: "With ana" in desk.parents()[0].text)

    # an operator's thread reply reaches Telegram once, labelled, even when Slack retries it
    await desk.operator_says("Hi, Ana here. Approved!", parent.ts, times=2)
    await desk.user_sees("Ana here. Approved!")
    await desk.operator_says("Anything else?", parent.ts)
    await desk.user_sees("Anything else?")
    replies = [t for t in desk.sent_to_user() if "ana:" in t]
    assert replies == ["<b>ana:</b> Hi, Ana here. Approved!", "<b>ana:</b> Anything else?"]

    await desk.user_says("Thanks!")
    await until(lambda: any("Thanks!" in t for t in desk.thread(parent.ts)))
    assert len(provider.requests) == 2  # still nobody asked the model

    await desk.press("handoff.release", handoff_id, parent.ts)
    await desk.user_sees("handed the conversation back")
    await until(lambda: handoff_row(desk)[1] == "released")

    await desk.user_says("So when do I get the money?")
    await provider.wait_requests(3)
    said = "\n".join(str(m.content) for m in provider.requests[2].messages)
    assert "a person handled this" in said and "ana" in said and SUMMARY in said
    assert "Hello? Is someone there?" in said and "Ana here. Approved!" in said
    await desk.user_sees("Your refund is approved")
    actions = [a for (a,) in db_rows(app, "select action from handoff_events order by id")]
    assert actions == ["requested", "took", "released"]


async def test_a_restart_mid_handoff_keeps_it(desk: Desk) -> None:
    provider = ScriptedProvider([Reply("unused")])
    app = await desk.start(provider)
    await desk.user_says("/human my card is blocked")
    await desk.user_sees("asked a person to take over")
    await until(lambda: asked(desk))
    handoff_id, _, thread = handoff_row(desk)
    assert thread is not None
    await desk.press("handoff.take", handoff_id, thread)
    await desk.user_sees("ana has joined")
    await app.stop()

    app = await desk.start(ScriptedProvider([Reply("unused")]))
    await desk.user_says("still there?")
    await until(lambda: any("still there?" in t for t in desk.thread(thread)))
    await desk.operator_says("Yes, unblocking it now.", thread)
    await desk.user_sees("unblocking it now")
    assert app.provider.requests == []  # type: ignore[attr-defined]
    state = await app.handoff.desk.states.get(f"telegram:{4242}")  # type: ignore[union-attr]
    assert state.mode == "human" and state.assignee == "slack:UOP1"
    await desk.operator_says("!resolve", thread)  # typed instead of pressing the button
    await desk.user_sees("marked this conversation as resolved")
    assert handoff_row(desk)[1] == "resolved"


async def test_two_operators_press_take_at_once_and_one_wins(desk: Desk) -> None:
    app = await desk.start(ScriptedProvider([Reply("unused")]))
    await desk.user_says("/human")
    await until(lambda: asked(desk))
    handoff_id, _, thread = handoff_row(desk)
    assert app.handoff is not None
    taking = [
        app.handoff.desk.take(handoff_id, Operator(f"admin:{name}", name), via="test")
        for name in ("ana", "ben", "cleo", "dan")
    ]
    results = await asyncio.gather(*taking, return_exceptions=True)
    won = [r for r in results if not isinstance(r, BaseException)]
    lost = [r for r in results if isinstance(r, AlreadyTaken)]
    assert len(won) == 1 and len(lost) == 3, results
    assert all(exc.holder == won[0].operator_name for exc in lost)
    joined = [t for t in desk.sent_to_user() if "has joined" in t]
    assert joined == [
        f"{won[0].operator_name} has joined the conversation and will answer you here."
    ]
    # pressing Take in Slack now: told who has it, in the thread
    assert thread is not None
    await desk.press("handoff.take", handoff_id, thread, user="UOP9", name="zed")
    await until(lambda: any("already taken by" in t for t in desk.thread(thread)))


async def test_stop_withdraws_and_the_queue_times_out(desk: Desk) -> None:
    provider = ScriptedProvider([Reply("back to work")])
    await desk.start(provider, queue_timeout_s=0.5)
    await desk.user_says("/human")
    await desk.user_sees("asked a person to take over")
    await desk.user_says("/stop")
    await desk.user_sees("withdrew the request")
    await until(lambda: handoff_row(desk)[1] == "withdrawn")
    await until(lambda: "withdrew" in desk.parents()[0].text)

    await desk.user_says("/human")
    await until(lambda: handoff_row(desk)[1] == "waiting")
    await desk.user_sees("nobody could take over in time")
    await until(lambda: "Nobody took it in time" in desk.parents()[-1].text)
    await until(lambda: handoff_row(desk)[1] == "expired")
    await desk.user_says("ok then")
    await desk.user_sees("back to work")


async def test_no_operator_place_or_outside_hours_keeps_the_bot(desk: Desk) -> None:
    await desk.start(ScriptedProvider([Reply("unused")]), hours="sun-sun 00:00-00:01")
    await desk.user_says("/human")
    await desk.user_sees("nobody is on duty right now")
    assert desk.parents() == []
    assert db_rows(desk.apps[-1], "select count(*) from handoffs") == [(0,)]


__all__ += ["OPS"]


async def test_human_while_a_turn_runs_switches_after_its_final(desk: Desk) -> None:
    """`/human` mid-turn is kept and switched to in the conversation's queue: the running
    turn's final goes out first, then the notice (never the other way round)."""
    gate = asyncio.Event()
    provider = ScriptedProvider([Reply(FINAL, wait=gate)])
    app = await desk.start(provider)
    await desk.user_says("can I get a refund?")
    await provider.wait_requests(1)  # the turn runs, its model call held
    await desk.user_says("/human")
    asked = "select count(*) from conversation_states where settings like '%handoff_asked%'"
    opened = "select count(*) from handoffs"
    await until(lambda: db_rows(app, asked) != [(0,)] or db_rows(app, opened) != [(0,)])
    gate.set()
    await desk.user_sees("asked a person to take over")
    calls = desk.telegram.ok(4242, "sendmessage", "editmessagetext")
    final = next(c.at for c in calls if FINAL in str(c.params.get("text", "")))
    notice = next(c.at for c in calls if "asked a person" in str(c.params.get("text", "")))
    assert final < notice
    await until(lambda: handoff_row(desk)[1] == "waiting")
    # with an operator place, Telegram's command menu offers /human
    menu = next(c.params for c in desk.telegram.calls if c.method == "setmycommands")
    assert "human" in [command["command"] for command in menu["commands"]]
