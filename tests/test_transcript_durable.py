"""The transcript outlives the process: after a restart a page gets it from the database.

The app is stopped and started again on the same SQLite file (as a deploy would), with a real web
socket client; what a page sees is compared with what was said, ids included.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from agent.providers.base import Provider
from agent.providers.scripted import Reply, ScriptedProvider
from bot.runtime.app import App
from tests.conftest import WsClient, connect, db_rows, make_config
from tests.processes import serving

Start = Callable[..., Awaitable[App]]


@pytest.fixture
async def start(tmp_path: Path) -> AsyncIterator[Start]:
    """`app = await start(provider, {section: ...}, replay_events=N)`: an app on tmp_path's
    database, with these config sections and `channels.websocket` options."""
    apps: list[App] = []

    async def make(
        provider: Provider, sections: dict[str, Any] | None = None, **websocket: Any
    ) -> App:
        config = make_config(tmp_path, channels={"websocket": websocket}, **(sections or {}))
        app = App(config, base_dir=tmp_path, provider=provider)
        await app.__aenter__()
        apps.append(app)
        return app

    yield make
    for app in apps:
        await app.stop()


async def page_load(
    session: aiohttp.ClientSession, app: App, visitor: str = "visitor-0001", resume_after: int = 0
) -> tuple[WsClient, dict[str, Any], list[dict[str, Any]]]:
    """A page opening with nothing shown: ready, and every frame sent before live ones.

    A frame of an unknown type right after hello is answered with an error after everything
    hello sent (frames of one socket are handled in order), which marks the end.
    """
    tab = await connect(session, app)
    await tab.send(type="hello", visitor_id=visitor, resume_after=resume_after)
    await tab.send(type="end-of-replay")
    ready = await tab.until_type("ready")
    frames: list[dict[str, Any]] = []
    while (frame := await tab.next())["type"] != "error":
        frames.append(frame)
    assert frame["code"] == "unknown_type"
    return tab, ready, frames


def shown(frames: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """The transcript as a page shows it: the user's messages and the final answers."""
    return [
        (f["type"], f["message_id"], f["text"])
        for f in frames
        if f["type"] in {"message.user", "message.completed"}
    ]


async def chat(app: App, session: aiohttp.ClientSession, *texts: tuple[str, str]) -> list[str]:
    """Say each (client_message_id, text); the ids of the answers' messages."""
    tab = await connect(session, app)
    await tab.hello("visitor-0001")
    answers = [(await tab.ask(text, cmid))["message_id"] for cmid, text in texts]
    await app.gateway.wait_idle()  # the turn rows are written just after the final edits
    await tab.ws.close()
    return answers


async def test_after_a_restart_a_page_gets_the_whole_transcript_with_the_users_ids(
    start: Start, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("One."), Reply("Two."), Reply("Three.")])
    app = await start(provider)
    m1, m2 = await chat(app, session, ("c1", "first question"), ("c2", "second question"))
    await app.stop()

    app = await start(provider)  # the same database; the replay buffer is empty
    tab, ready, frames = await page_load(session, app)
    assert ready["seq"] == 0
    assert shown(frames) == [
        ("message.user", "c1", "first question"),
        ("message.completed", m1, "One."),
        ("message.user", "c2", "second question"),
        ("message.completed", m2, "Two."),
    ]
    assert all(f["history"] is True and "seq" not in f for f in frames)

    # live from the hub after it, and the next page gets both, stored first, without doubles
    m3 = (await tab.ask("third question", "c3"))["message_id"]
    await app.gateway.wait_idle()
    _, _, frames = await page_load(session, app)
    assert [(kind, ident) for kind, ident, _ in shown(frames)] == [
        ("message.user", "c1"),
        ("message.completed", m1),
        ("message.user", "c2"),
        ("message.completed", m2),
        ("message.user", "c3"),
        ("message.completed", m3),
    ]
    assert [("seq" in f) for f in frames if f["type"] == "message.user"] == [False, False, True]


async def test_new_then_a_restart_shows_nothing_from_before(
    start: Start, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("Before."), Reply("After.")])
    app = await start(provider)
    await chat(app, session, ("c1", "before"), ("c2", "/new"))
    await app.stop()
    app = await start(provider)
    _, _, frames = await page_load(session, app)
    assert frames == []

    [answer] = await chat(app, session, ("c3", "after"))
    await app.stop()
    app = await start(provider)
    _, _, frames = await page_load(session, app)
    assert shown(frames) == [
        ("message.user", "c3", "after"),
        ("message.completed", answer, "After."),
    ]


async def test_with_mask_user_text_the_stored_question_comes_back_masked(
    start: Start, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("Noted.")])
    app = await start(provider, {"tools": {"pii": {"mask_user_text": True}}})
    await chat(app, session, ("c1", "write to ann@example.com"))
    await app.stop()
    app = await start(provider, {"tools": {"pii": {"mask_user_text": True}}})
    _, _, frames = await page_load(session, app)
    assert shown(frames)[0] == ("message.user", "c1", "write to [email]")
    assert provider.requests[0].messages[-1].content == "write to [email]"  # as the model saw it


async def test_a_conversation_longer_than_the_buffer_is_shown_whole(
    start: Start, session: aiohttp.ClientSession
) -> None:
    replies = [Reply(f"Answer {n}.", chunks=3) for n in range(8)]
    app = await start(ScriptedProvider(replies), replay_events=6)  # two turns' frames
    said = [(f"c{n}", f"question {n}") for n in range(8)]
    answers = await chat(app, session, *said)
    expected = []
    for n, ((cmid, text), answer_id) in enumerate(zip(said, answers, strict=True)):
        expected += [("message.user", cmid, text), ("message.completed", answer_id, f"Answer {n}.")]
    _, _, frames = await page_load(session, app)  # the same process: the hub still has the end
    assert shown(frames) == expected
    assert "seq" in frames[-1] and "seq" not in frames[0]

    # a tab that was away since seq 1 (long gone from the buffer) gets what it missed too
    _, _, frames = await page_load(session, app, resume_after=1)
    assert ("message.completed", answers[0], "Answer 0.") in shown(frames)
    assert shown(frames)[-1] == ("message.completed", answers[-1], "Answer 7.")


async def test_a_tab_back_after_a_streamed_answer_gets_it_from_the_replay_alone(
    start: Start, session: aiohttp.ClientSession
) -> None:
    app = await start(ScriptedProvider([Reply("Answer 0.")]))
    await chat(app, session, ("c0", "question 0"))  # a stored transcript to fall back on
    hub = app.channels["websocket"]._hub  # type: ignore[attr-defined]  # the channel's own hub
    conversation = "v:visitor-0001"
    placeholder = await hub.publish(conversation, "message.created", {"message_id": "m1"})
    for text in ("Ans", "Answer"):  # superseded in the buffer by the next
        await hub.publish(conversation, "message.updated", {"message_id": "m1", "text": text})
    await hub.publish(conversation, "message.completed", {"message_id": "m1", "text": "Answer."})
    _, _, frames = await page_load(session, app, resume_after=placeholder)
    assert [(f["type"], f.get("seq")) for f in frames] == [("message.completed", placeholder + 3)]


async def test_the_stored_transcript_is_capped_at_the_last_100_messages(
    start: Start, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply(f"A{n}") for n in range(51)])
    app = await start(provider, rate_limit_per_minute=1_000_000)
    await chat(app, session, *[(f"c{n}", f"q{n}") for n in range(51)])
    await app.stop()
    app = await start(provider)
    _, _, frames = await page_load(session, app)
    assert len(frames) == 100
    assert shown(frames)[:2] == [("message.user", "c1", "q1"), shown(frames)[1]]
    assert shown(frames)[1][2] == "A1" and shown(frames)[-1][2] == "A50"


async def test_a_message_resent_after_a_restart_is_shown_once(
    start: Start, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("Once."), Reply("never")])
    app = await start(provider)
    [answer] = await chat(app, session, ("c1", "only once"))
    await app.stop()
    app = await start(provider)
    tab, _, _ = await page_load(session, app)
    await tab.send(type="message", text="only once", client_message_id="c1")  # unsure: resend
    echo = await tab.until_type("message.user")
    assert echo == {"type": "message.user", "message_id": "c1", "duplicate": True}
    _, _, frames = await page_load(session, app)
    assert shown(frames) == [
        ("message.user", "c1", "only once"),
        ("message.completed", answer, "Once."),
    ]
    assert len(provider.requests) == 1


async def test_one_process_writes_one_claim_a_message(
    start: Start, session: aiohttp.ClientSession
) -> None:
    """Embedded, the gateway's claim is the store's: the echo makes it for the gateway rather
    than writing a claim of its own, and a resend is still known after a restart (the test
    above)."""
    app = await start(ScriptedProvider([Reply("One."), Reply("Two.")]))
    await chat(app, session, ("c1", "first"), ("c2", "second"))
    await app.stop()
    claims = sorted(row[0] for row in db_rows(app, "SELECT event_id FROM event_claims"))
    assert len(claims) == 2 and not any(claim.startswith("echo:") for claim in claims), claims
    assert claims[0].endswith("c1") and claims[1].endswith("c2")


@pytest.mark.process
async def test_bot_serve_restarted_shows_the_transcript(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    """The real CLI, twice on one data folder (offline model): a deploy as an operator does it."""
    said = [("c1", "hello there"), ("c2", "what time is it?")]
    async with serving("--port", "0", cwd=tmp_path) as port:
        ws = await session.ws_connect(f"http://127.0.0.1:{port}/ws")
        tab = WsClient(ws)
        await tab.hello("visitor-0001")
        answers = [await tab.ask(text, cmid) for cmid, text in said]
        await ws.close()
    async with serving("--port", "0", cwd=tmp_path) as port:
        ws = await session.ws_connect(f"http://127.0.0.1:{port}/ws")
        tab = WsClient(ws)
        await tab.send(type="hello", visitor_id="visitor-0001", resume_after=0)
        await tab.send(type="end-of-replay")
        frames = []
        while (frame := await tab.next())["type"] != "error":
            frames.append(frame)
        await ws.close()
    assert shown(frames[1:]) == [
        ("message.user", "c1", "hello there"),
        ("message.completed", answers[0]["message_id"], answers[0]["text"]),
        ("message.user", "c2", "what time is it?"),
        ("message.completed", answers[1]["message_id"], answers[1]["text"]),
    ]


async def test_a_transcript_longer_than_a_sockets_queue_arrives_whole(
    start: Start, session: aiohttp.ClientSession
) -> None:
    """Replay and stored messages together may exceed the 256 frames a socket may have queued:
    what hello asked for is not "falling behind"."""
    turns = 90  # 270 kept frames: user, placeholder, answer
    provider = ScriptedProvider([Reply(f"A{n}") for n in range(turns)])
    app = await start(provider, replay_events=1000, rate_limit_per_minute=1_000_000)
    await chat(app, session, *[(f"c{n}", f"q{n}") for n in range(turns)])
    _, ready, frames = await page_load(session, app)
    # every kept frame, the newest last (a preview a busy machine showed was superseded by its
    # answer: it took a seq, but is not kept)
    assert len(frames) == 3 * turns and frames[-1]["seq"] == ready["seq"]
    assert shown(frames)[-1] == ("message.completed", frames[-1]["message_id"], f"A{turns - 1}")
