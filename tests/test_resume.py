"""Resuming a turn whose process died, in process, against the real SQLite store.

A kill -9 leaves exactly what was committed: each test runs a turn in app A until the moment
under test, copies the database with SQLite's backup API (the committed state, as a kill would
leave it), stops A, and starts app B on the copy: B must finish the turn in A's placeholder.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.base import ChatRef, InboundMessage
from agent.coordinator import NOT_FINISHED
from agent.providers.scripted import Reply, ScriptedProvider
from agent.types import AuditRecord, Message, ToolCall
from bot.pipeline.resume import GAVE_UP
from bot.runtime.app import App
from bot.storage import SqliteStore
from tests.conftest import make_config
from tests.fakes import RecordingChannel
from tools.base import ToolContext, ToolResult
from tools.builtin import builtin_registry
from tools.registry import ToolRegistry, tool

CHAT = ChatRef("fake", "dm-u1")
PERSONA = "---\nname: default\ndescription: Test coordinator.\ntools: {tools}\n---\nBe brief.\n"


class World:
    """The outside world the test tools act on: it survives a crash of the gateway."""

    def __init__(self) -> None:
        self.charges: list[str] = []
        self.peeks = 0
        self.entered = asyncio.Event()  # a blocking tool started
        self.release = asyncio.Event()


def registry_for(world: World) -> ToolRegistry:
    @tool
    async def charge(ctx: ToolContext, amount: int) -> ToolResult:
        """Charge the user's card (a side effect: never twice).

        Args:
            amount: how much
        """
        world.charges.append(f"ch-{len(world.charges) + 1}")
        card = {"type": "card", "title": f"Charge {world.charges[-1]}"}
        return ToolResult(f"charged {amount}: {world.charges[-1]}", display=(card,))

    @tool
    async def hold(ctx: ToolContext) -> str:
        """Start a transfer that takes a while (a side effect)."""
        world.entered.set()
        await world.release.wait()
        return "transferred"

    @tool(idempotent=True)
    async def peek(ctx: ToolContext) -> str:
        """Read the balance (a read: safe to run again)."""
        world.peeks += 1
        if world.peeks == 1:
            world.entered.set()
            await world.release.wait()
        return "balance 7"

    registry = builtin_registry()
    for extra in (charge, hold, peek):
        registry.add(extra)
    return registry


def _config(folder: Path, **agent: Any) -> Any:
    folder.mkdir(exist_ok=True)
    personas = folder / "personas"
    personas.mkdir(exist_ok=True)
    (personas / "default.md").write_text(PERSONA.format(tools='["charge", "hold", "peek"]'))
    return make_config(folder, personas={"dirs": [str(personas)]}, agent=agent)


@contextlib.asynccontextmanager
async def running(
    folder: Path, provider: ScriptedProvider, world: World, **agent: Any
) -> AsyncIterator[tuple[App, RecordingChannel]]:
    channel = RecordingChannel()
    app = App(
        _config(folder, **agent),
        base_dir=folder,
        provider=provider,
        registry=registry_for(world),
        channels=[channel],
        web_server=False,
    )
    await app.__aenter__()
    try:
        yield app, channel
    finally:
        await app.stop()


def snapshot(source: Path, target: Path) -> None:
    """The database as a kill -9 of its process would leave it: what was committed."""
    target.mkdir(exist_ok=True)
    with (
        contextlib.closing(sqlite3.connect(source / "bot.db")) as src,
        contextlib.closing(sqlite3.connect(target / "bot.db")) as dst,
    ):
        src.backup(dst)


def _message(text: str, event: str = "e1") -> InboundMessage:
    return InboundMessage(CHAT, "u1", text, event, f"msg-{event}", mentioned=True)


async def crash_during(
    tmp_path: Path, world: World, first: list[Reply], moment: asyncio.Event | None = None
) -> None:
    """Run "pay please" in app A until its model call #len(first) (or `moment`), then copy the
    database to tmp_path/"b" and stop A."""
    provider = ScriptedProvider([*first, Reply("never", wait=asyncio.Event())])
    async with running(tmp_path / "a", provider, world) as (app, _):
        await app.gateway.handle(_message("pay please"))
        if moment is not None:
            await asyncio.wait_for(moment.wait(), 5)
        else:
            await asyncio.wait_for(provider.wait_requests(len(first) + 1), 5)
        snapshot(tmp_path / "a", tmp_path / "b")


def _rows(folder: Path, sql: str) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(folder / "bot.db")) as db:
        return db.execute(sql).fetchall()


async def test_a_recorded_side_effect_is_replayed_and_the_answer_fills_the_same_placeholder(
    tmp_path: Path,
) -> None:
    world = World()
    await crash_during(tmp_path, world, [Reply(calls=[("charge", {"amount": 5})])])
    assert world.charges == ["ch-1"]
    provider = ScriptedProvider([Reply("Paid: ch-1.")])
    async with running(tmp_path / "b", provider, world) as (app, channel):
        await app.gateway.wait_idle()
    assert world.charges == ["ch-1"]  # replayed, not charged again
    (request,) = provider.requests
    assert [(m.role, m.content) for m in request.messages] == [
        ("user", "pay please"),
        ("assistant", ""),
        ("tool", "charged 5: ch-1"),
    ]
    assert [c.kind for c in channel.calls] == ["edit"] * len(channel.calls)
    final = channel.calls[-1]
    assert (final.message_id, final.text, final.final) == ("m1", "Paid: ch-1.", True)
    status = _rows(tmp_path / "b", "select status, final_text, resume_attempts from turns")
    assert status == [("completed", "Paid: ch-1.", 1)]


async def test_the_recorded_card_of_a_replayed_result_reaches_the_final(tmp_path: Path) -> None:
    world = World()
    await crash_during(tmp_path, world, [Reply(calls=[("charge", {"amount": 5})])])
    provider = ScriptedProvider([Reply("Paid.")])
    async with running(tmp_path / "b", provider, world) as (app, _):
        finals: list[Any] = []
        original = app.channels["fake"].edit

        async def edit(handle: Any, content: Any, *, final: bool = False) -> None:
            if final:
                finals.append(content.display)
            await original(handle, content, final=final)

        app.channels["fake"].edit = edit  # type: ignore[method-assign]
        await app.gateway.wait_idle()
    assert finals == [({"type": "card", "title": "Charge ch-1"},)]


async def test_a_side_effect_in_flight_makes_the_turn_unresumable(tmp_path: Path) -> None:
    world = World()
    await crash_during(tmp_path, world, [Reply(calls=[("hold", {})])], moment=world.entered)
    provider = ScriptedProvider([Reply("next answer")])
    async with running(tmp_path / "b", provider, world) as (app, channel):
        await app.gateway.wait_idle()
        assert provider.requests == []  # nothing run again, no model call
        assert [(c.message_id, c.text) for c in channel.calls] == [("m1", GAVE_UP)]
        await app.gateway.handle(_message("and now?", "e2"))
        await app.gateway.wait_idle()
    (turn, _) = _rows(tmp_path / "b", "select status, error from turns order by rowid")
    assert turn[0] == "failed" and "hold" in turn[1] and "idempotent" in turn[1]
    # the history stays valid for the model: the open call is closed before the next question
    roles = [(m.role, m.content) for m in provider.requests[0].messages]
    assert roles == [
        ("user", "pay please"),
        ("assistant", ""),
        ("tool", NOT_FINISHED),
        ("user", "and now?"),
    ]


async def test_an_idempotent_call_in_flight_runs_again(tmp_path: Path) -> None:
    world = World()
    await crash_during(tmp_path, world, [Reply(calls=[("peek", {})])], moment=world.entered)
    provider = ScriptedProvider([Reply("Balance is 7.")])
    async with running(tmp_path / "b", provider, world) as (app, channel):
        await app.gateway.wait_idle()
    assert world.peeks == 2
    assert provider.requests[0].messages[-1].content == "balance 7"
    assert channel.calls[-1].text == "Balance is 7." and channel.calls[-1].message_id == "m1"


async def _left_running(
    folder: Path, messages: list[Message], *, agent_id: str = "default", attempts: int = 0
) -> str:
    """A turn as a process killed mid-turn left it, written through the store's own methods."""
    folder.mkdir(exist_ok=True)
    async with SqliteStore(folder / "bot.db") as store:
        session = await store.active_session(
            channel="fake", conversation_key=CHAT.key, user_id="u1", agent_id=agent_id
        )
        placeholder = {"channel": "fake", "chat_id": CHAT.chat_id, "message_id": "m1"}
        await store.create_turn(
            turn_id="t1",
            session_id=session,
            channel="fake",
            conversation_key=CHAT.key,
            inbound_event_ids=["e1"],
            placeholder=placeholder,
        )
        await store.append_messages(session, "t1", messages)
        for _ in range(attempts):
            assert await store.begin_resume("t1") is not None
        return session


async def test_a_recorded_answer_is_delivered_without_calling_the_model(tmp_path: Path) -> None:
    await _left_running(tmp_path / "b", [Message("user", "hi"), Message("assistant", "Hello!")])
    provider = ScriptedProvider([])
    async with running(tmp_path / "b", provider, World()) as (app, channel):
        await app.gateway.wait_idle()
    assert provider.requests == []
    assert [(c.message_id, c.text, c.final) for c in channel.calls] == [("m1", "Hello!", True)]


async def test_a_result_only_in_the_audit_log_is_replayed(tmp_path: Path) -> None:
    """The crash fell between the audit row and the message row of a finished call."""
    call = ToolCall("c1", "charge", '{"amount": 5}')
    steps = [Message("user", "pay"), Message("assistant", "", tool_calls=(call,))]
    session = await _left_running(tmp_path / "b", steps)
    async with SqliteStore(tmp_path / "b" / "bot.db") as store:
        entry = AuditRecord(
            session, "t1", "c1", "charge", call.arguments, "charged 5: ch-9", True, 1.0
        )
        await store.record_tool_call(entry)
    world = World()
    provider = ScriptedProvider([Reply("Paid: ch-9.")])
    async with running(tmp_path / "b", provider, world) as (app, channel):
        await app.gateway.wait_idle()
    assert world.charges == []
    assert provider.requests[0].messages[-1].content == "charged 5: ch-9"
    assert channel.calls[-1].text == "Paid: ch-9."
    kept = _rows(tmp_path / "b", "select role, content from messages where role = 'tool'")
    assert kept == [("tool", "charged 5: ch-9")]  # recorded now: the history is whole


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        ({"attempts": 2}, "taken up 2 times already"),
        ({"agent_id": "ghost"}, "persona gone"),
        ({"old": True}, "too old"),
    ],
)
async def test_a_turn_that_cannot_be_resumed_ends_with_an_apology(
    tmp_path: Path, setup: dict[str, Any], reason: str
) -> None:
    old = setup.pop("old", False)
    call = ToolCall("c1", "hold", "{}")
    steps = [Message("user", "hi"), Message("assistant", "", tool_calls=(call,))]
    await _left_running(tmp_path / "b", steps, **setup)
    if old:
        with contextlib.closing(sqlite3.connect(tmp_path / "b" / "bot.db")) as db:
            db.execute("update turns set created_at = '2020-01-01T00:00:00+00:00'")
            db.commit()
    provider = ScriptedProvider([])
    async with running(tmp_path / "b", provider, World()) as (app, channel):
        await app.gateway.wait_idle()
    assert provider.requests == []
    assert [(c.message_id, c.text) for c in channel.calls] == [("m1", GAVE_UP)]
    ((status, error),) = _rows(tmp_path / "b", "select status, error from turns")
    assert status == "failed" and reason in error
    closed = _rows(tmp_path / "b", "select tool_call_id, content from messages where role = 'tool'")
    assert closed == [("c1", NOT_FINISHED)]  # the history stays valid for the next turn


async def test_a_turn_that_keeps_crashing_is_given_up_after_max_attempts(tmp_path: Path) -> None:
    """Each start counts an attempt before the model runs, so a crash loop ends."""
    await _left_running(tmp_path / "b", [Message("user", "hi")])
    for attempt in (1, 2):
        folder = tmp_path / f"run{attempt}"
        snapshot(tmp_path / "b", folder)
        provider = ScriptedProvider([Reply("x", wait=asyncio.Event())])
        async with running(folder, provider, World(), resume_max_attempts=2) as (app, _):
            await asyncio.wait_for(provider.wait_requests(1), 5)
            snapshot(folder, tmp_path / "b")  # "killed" while the model works, again
    provider = ScriptedProvider([])
    async with running(tmp_path / "b", provider, World(), resume_max_attempts=2) as (app, ch):
        await app.gateway.wait_idle()
    assert provider.requests == [] and [c.text for c in ch.calls] == [GAVE_UP]
    assert _rows(tmp_path / "b", "select resume_attempts from turns") == [(3,)]


async def test_a_new_message_waits_for_the_resumed_turn_of_its_conversation(
    tmp_path: Path,
) -> None:
    await _left_running(tmp_path / "b", [Message("user", "first")])
    gate = asyncio.Event()
    provider = ScriptedProvider([Reply("first answer", wait=gate), Reply("second answer")])
    async with running(tmp_path / "b", provider, World()) as (app, channel):
        await app.gateway.handle(_message("second", "e2"))
        await asyncio.wait_for(provider.wait_requests(1), 5)
        gate.set()
        await app.gateway.wait_idle()
    assert [m.content for m in provider.requests[1].messages] == [
        "first",
        "first answer",
        "second",
    ]
    kinds = [c.kind for c in channel.calls]
    resumed, new = channel.calls[: kinds.index("send")], channel.calls[kinds.index("send") :]
    assert {c.message_id for c in resumed} == {"m1"} and resumed[-1].text == "first answer"
    assert new[-1].text == "second answer" and kinds.count("send") == 1  # B's own placeholder


async def test_a_specialist_cut_off_by_the_crash_is_reported_failed(tmp_path: Path) -> None:
    folder = tmp_path / "b"
    session = await _left_running(folder, [Message("user", "hi"), Message("assistant", "Hi!")])
    async with SqliteStore(folder / "bot.db") as store:
        await store.finish_turn("t1", status="completed", final_text="Hi!")
        worker = await store.create_session(
            agent_id="specialist-research",
            channel="fake",
            conversation_key=CHAT.key,
            user_id="u1",
            parent_session_id=session,
        )
        await store.set_session_status(worker, "running")
    provider = ScriptedProvider([Reply("Sorry, the research was interrupted.")])
    async with running(folder, provider, World()) as (app, channel):
        await app.gateway.wait_idle()
    assert _rows(folder, f"select status from chat_sessions where id = '{worker}'") == [("failed",)]
    notice = provider.requests[0].messages[-1].content
    assert 'status="failed"' in notice and "interrupted" in notice
    assert channel.calls[-1].text == "Sorry, the research was interrupted."


async def test_a_stopped_turn_closes_the_calls_it_left_open(tmp_path: Path) -> None:
    """Steps are recorded as they happen, so a turn that ends early must leave the history
    valid: a call without a result would make the next model request fail."""
    world = World()
    provider = ScriptedProvider([Reply(calls=[("hold", {})]), Reply("fresh answer")])
    async with running(tmp_path / "a", provider, world) as (app, channel):
        await app.gateway.handle(_message("transfer"))
        await asyncio.wait_for(world.entered.wait(), 5)
        await app.gateway.handle(_message("/stop", "e2"))
        await app.gateway.wait_idle()
        await app.gateway.handle(_message("hello again", "e3"))
        await app.gateway.wait_idle()
    roles = [(m.role, m.content) for m in provider.requests[1].messages]
    assert roles == [
        ("user", "transfer"),
        ("assistant", ""),
        ("tool", NOT_FINISHED),
        ("user", "hello again"),
    ]
    assert channel.calls[-1].text == "fresh answer"


async def test_a_specialist_the_turn_was_waiting_for_gets_no_second_note(tmp_path: Path) -> None:
    """The turn had a foreground AgentTool call open: it ends with its apology, and the lost
    specialist is not reported again as a background result."""
    folder = tmp_path / "b"
    call = ToolCall("c1", "AgentTool", '{"subagent_type": "specialist-research"}')
    steps = [Message("user", "research this"), Message("assistant", "", tool_calls=(call,))]
    session = await _left_running(folder, steps)
    async with SqliteStore(folder / "bot.db") as store:
        worker = await store.create_session(
            agent_id="specialist-research",
            channel="fake",
            conversation_key=CHAT.key,
            user_id="u1",
            parent_session_id=session,
        )
        await store.set_session_status(worker, "running")
    provider = ScriptedProvider([])
    async with running(folder, provider, World()) as (app, channel):
        await app.gateway.wait_idle()
    assert provider.requests == []
    assert [(c.message_id, c.text) for c in channel.calls] == [("m1", GAVE_UP)]
    assert _rows(folder, f"select status from chat_sessions where id = '{worker}'") == [("failed",)]
