"""The coordinator and its specialists through a running app and a real web socket client."""

import asyncio
import json
from pathlib import Path
from typing import Any, Protocol

import pytest
from aiohttp import ClientSession

from agent.providers.scripted import Reply, ScriptedProvider
from agent.types import ModelRequest
from bot.pipeline.turn import STOPPED
from bot.reports.sessions_view import show_session
from bot.runtime.app import App
from tests.agents_kit import (
    SUM,
    TASK,
    Probe,
    Router,
    Step,
    dispatch,
    last_tool_results,
    registry_with,
    write_personas,
)
from tests.conftest import Running, connect, db_rows, eventually, settled


@pytest.fixture
def probe() -> Probe:
    return Probe()


class Start(Protocol):
    async def __call__(self, router: Router, **sections: Any) -> App: ...


@pytest.fixture
def start(running: Running, tmp_path: Path, probe: Probe) -> Start:
    folder = write_personas(tmp_path / "personas")

    async def go(router: Router, **sections: Any) -> App:
        sections.setdefault("personas", {"dirs": [str(folder)]})
        return await running(ScriptedProvider(router), registry=registry_with(probe), **sections)

    return go


async def test_dispatch_result_is_synthesized_into_the_final_answer(
    start: Start, session: ClientSession, probe: Probe
) -> None:
    router = Router(
        default=[
            Reply(calls=[dispatch("specialist-a", TASK, description="moon crew")]),
            Reply("Armstrong, Aldrin and Collins."),
        ],
        specialist_a=[
            Reply(calls=[("lookup", {"query": "apollo 11 crew"})]),
            Reply("Crew: Armstrong, Aldrin, Collins"),
        ],
    )
    app = await start(router)
    client = await connect(session, app)
    await client.hello()
    final = await client.ask("Who flew on Apollo 11?")
    assert final["text"] == "Armstrong, Aldrin and Collins."
    kinds = [f["type"] for f in client.frames]
    assert (
        kinds.index("agent.started")
        < kinds.index("agent.finished")
        < kinds.index("message.completed")
    )
    started = next(f for f in client.frames if f["type"] == "agent.started")
    assert started["subagent_type"] == "specialist-a" and started["description"] == "moon crew"
    finished = next(f for f in client.frames if f["type"] == "agent.finished")
    assert finished["status"] == "completed" and finished["task_id"] == started["task_id"]
    # the coordinator read the worker's result, never its transcript
    result = last_tool_results(router.seen["default"][1])[0]
    assert (
        result["result"] == "Crew: Armstrong, Aldrin, Collins" and result["status"] == "completed"
    )
    worker_request = router.seen["specialist-a"][0]
    assert [m.content for m in worker_request.messages] == [TASK]
    assert [s.name for s in worker_request.tools] == ["lookup", "slow_tool"]
    catalog = router.seen["default"][0].system
    assert 'specialist-a ("Fact finder"): Finds facts' in catalog  # the catalog
    assert "default:" not in router.seen["default"][0].system.split("<system-reminder>")[1]
    # session tree and audit rows
    (parent_id, worker_id) = db_rows(
        app, "select parent_session_id, id from chat_sessions where agent_id='specialist-a'"
    )[0]
    assert db_rows(app, "select agent_id from chat_sessions where id=?", parent_id) == [
        ("default",)
    ]
    audit = db_rows(app, "select session_id, tool_name, ok from audit_logs order by id")
    assert (worker_id, "lookup", 1) in audit and (parent_id, "AgentTool", 1) in audit
    assert probe.calls == [("lookup", "apollo 11 crew", worker_id)]
    tree = await show_session(app.store, parent_id[:8])
    assert f"session {parent_id}" in tree and f"└─ session {worker_id}" in tree
    assert tree.index("AgentTool(") < tree.index(f"└─ session {worker_id}") < tree.index("lookup(")


async def test_placeholder_says_who_is_asked_and_shows_a_status_line(
    start: Start, session: ClientSession, probe: Probe
) -> None:
    router = Router(
        default=[
            Reply(calls=[dispatch("specialist-a", TASK, description="moon crew")]),
            Reply("done"),
        ],
        specialist_a=[Reply(calls=[("slow_tool", {})]), Reply("slow done")],
    )
    app = await start(router)
    client = await connect(session, app)
    await client.hello()
    await client.send(type="message", text="go")
    update = await client.until(lambda f: f["type"] == "message.updated" and "⏳" in f["text"])
    # users see the persona's display name, never its internal name or the prompt
    assert update["text"].startswith("Asking Fact finder — one moment")
    assert "⏳ Fact finder — moon crew" in update["text"]
    probe.release.set()
    assert (await client.until_type("message.completed"))["text"] == "done"
    started = next(f for f in client.frames if f["type"] == "agent.started")
    assert started["display_name"] == "Fact finder" and started["description"] == "moon crew"
    shown = [f.get("text", "") + f.get("display_name", "") for f in client.frames]
    assert not [text for text in shown if "specialist-a" in text or TASK in text]


async def test_two_dispatches_in_one_round_run_in_parallel(
    start: Start, session: ClientSession, probe: Probe
) -> None:
    both = asyncio.Event()
    arrived: list[str] = []

    def wait_for_both(name: str) -> Step:
        def step(request: ModelRequest) -> Reply:
            arrived.append(name)
            if len(arrived) == 2:
                both.set()
            return Reply(f"{name} result", wait=both)

        return step

    router = Router(
        default=[
            Reply(calls=[dispatch("specialist-a", TASK), dispatch("specialist-b", SUM)]),
            Reply("combined"),
        ],
        specialist_a=[wait_for_both("a")],
        specialist_b=[wait_for_both("b")],
    )
    app = await start(router)
    client = await connect(session, app)
    await client.hello()
    assert (await client.ask("do both", client_message_id="x"))["text"] == "combined"
    results = last_tool_results(router.seen["default"][1])
    assert [r["result"] for r in results] == ["a result", "b result"]
    kinds = [f["type"] for f in client.frames if f["type"].startswith("agent.")]
    assert kinds == ["agent.started", "agent.started", "agent.finished", "agent.finished"]


async def test_background_result_arrives_once_as_a_new_message(
    start: Start, session: ClientSession, probe: Probe
) -> None:
    gate = asyncio.Event()
    router = Router(
        default=[
            Reply(calls=[dispatch("specialist-a", TASK, background=True)]),
            Reply("I've asked the archive; I'll report back."),
            Reply("The archive says: Armstrong, Aldrin, Collins."),
        ],
        specialist_a=[Reply("Crew: Armstrong, Aldrin, Collins", wait=gate)],
    )
    app = await start(router)
    client = await connect(session, app)
    await client.hello()
    first = await client.ask("look it up in the background", client_message_id="q1")
    assert first["text"] == "I've asked the archive; I'll report back."
    running = last_tool_results(router.seen["default"][1])[0]
    assert running["status"] == "running" and running["task_id"]
    gate.set()
    created = await client.until_type("message.created")
    assert created["reply_to"] is None
    follow_up = await client.until_type("message.completed")
    assert follow_up["text"] == "The archive says: Armstrong, Aldrin, Collins."
    notice = router.seen["default"][2].messages[-1].content
    assert f'task_id="{running["task_id"]}"' in notice and "Crew: Armstrong" in notice
    await settled(app)  # nothing else may arrive
    assert len(router.seen["default"]) == 3
    assert len([f for f in client.frames if f["type"] == "message.completed"]) == 2


async def test_two_background_results_finishing_together_make_one_follow_up(
    start: Start, session: ClientSession, probe: Probe
) -> None:
    gate = asyncio.Event()
    router = Router(
        default=[
            Reply(
                calls=[
                    dispatch("specialist-a", TASK, background=True),
                    dispatch("specialist-b", SUM, background=True),
                ]
            ),
            Reply("Both are on it."),
            Reply("Here are both results."),
        ],
        specialist_a=[Reply("fact A", wait=gate)],
        specialist_b=[Reply("fact B", wait=gate)],
    )
    app = await start(router)
    client = await connect(session, app)
    await client.hello()
    await client.ask("two background jobs")
    gate.set()
    follow_up = await client.until_type("message.completed")
    assert follow_up["text"] == "Here are both results."
    notice = router.seen["default"][2].messages[-1].content
    assert "fact A" in notice and "fact B" in notice
    await app.gateway.wait_idle()
    assert len(router.seen["default"]) == 3


async def test_send_message_shows_before_the_final(
    start: Start, session: ClientSession, probe: Probe
) -> None:
    hold = asyncio.Event()
    router = Router(
        default=[
            Reply(calls=[("SendMessage", {"message": "Checking two sources — one moment"})]),
            Reply("Final answer.", wait=hold),
        ]
    )
    app = await start(router)
    client = await connect(session, app)
    await client.hello()
    await client.send(type="message", text="check")
    interim = await client.until(
        lambda f: f["type"] == "message.updated" and "Checking two sources" in f["text"]
    )
    hold.set()
    final = await client.until_type("message.completed")
    assert final["message_id"] == interim["message_id"] and final["text"] == "Final answer."


async def test_task_stop_kills_the_worker_and_its_tool_in_flight(
    start: Start, session: ClientSession, probe: Probe
) -> None:
    def stop_it(request: ModelRequest) -> Reply:
        task_id = last_tool_results(request)[0]["task_id"]
        return Reply(calls=[("TaskStop", {"task_id": task_id})], wait=probe.slow_started)

    router = Router(
        default=[
            Reply(calls=[dispatch("specialist-a", TASK, background=True)]),
            stop_it,
            Reply("Stopped that task."),
        ],
        specialist_a=[Reply(calls=[("slow_tool", {})]), Reply("too late")],
    )
    app = await start(router)
    client = await connect(session, app)
    await client.hello()
    await client.send(type="message", text="start then stop")
    await asyncio.wait_for(probe.slow_started.wait(), 5)
    final = await client.until_type("message.completed")
    assert final["text"] == "Stopped that task."
    stopped = last_tool_results(router.seen["default"][2])[0]
    assert stopped["status"] == "killed"
    finished = [f for f in client.frames if f["type"] == "agent.finished"]
    assert [f["status"] for f in finished] == ["killed"]
    assert len(probe.cancelled) == 1  # the cancellation reached the tool in flight
    assert db_rows(app, "select status from chat_sessions where agent_id='specialist-a'") == [
        ("killed",)
    ]
    probe.release.set()
    await app.gateway.wait_idle()
    assert len(router.seen["default"]) == 3  # no late delivery


async def test_user_stop_kills_the_turn_and_its_workers(
    start: Start, session: ClientSession, probe: Probe
) -> None:
    router = Router(
        default=[Reply(calls=[dispatch("specialist-a", TASK)]), Reply("never")],
        specialist_a=[Reply(calls=[("slow_tool", {})]), Reply("never either")],
    )
    app = await start(router)
    client = await connect(session, app)
    await client.hello()
    await client.send(type="message", text="long job")
    await asyncio.wait_for(probe.slow_started.wait(), 5)
    await client.send(type="stop")
    final = await client.until_type("message.completed")
    assert final["text"] == STOPPED
    await client.seen(lambda f: f["type"] == "agent.finished" and f["status"] == "killed")
    assert probe.cancelled and db_rows(
        app, "select status from chat_sessions where agent_id='specialist-a'"
    ) == [("killed",)]
    probe.release.set()
    await app.gateway.wait_idle()
    assert len(router.seen["default"]) == 1 and len(router.seen["specialist-a"]) == 1


async def test_redirect_stub_then_the_right_call(
    start: Start, session: ClientSession, probe: Probe
) -> None:
    router = Router(
        default=[
            Reply(calls=[("web_search", {"query": "apollo crew"})]),
            Reply(calls=[dispatch("specialist-a", TASK)]),
            Reply("Found it."),
        ],
        specialist_a=[Reply("crew facts")],
    )
    app = await start(router)
    client = await connect(session, app)
    await client.hello()
    assert (await client.ask("search the web"))["text"] == "Found it."
    redirect = last_tool_results(router.seen["default"][1])[0]
    assert redirect["status"] == "redirect"
    assert set(redirect) == {"status", "hint", "reason", "suggested_call", "why_stub_exists"}
    assert redirect["suggested_call"]["arguments"]["subagent_type"] == "specialist-research"
    assert last_tool_results(router.seen["default"][2])[0]["result"] == "crew facts"


async def test_unknown_tool_then_a_correct_call(
    start: Start, session: ClientSession, probe: Probe
) -> None:
    router = Router(
        default=[
            Reply(calls=[("frobnicate", {})]),
            Reply(calls=[("get_current_datetime", {"timezone": "UTC"})]),
            Reply("It is late."),
        ]
    )
    app = await start(router)
    client = await connect(session, app)
    await client.hello()
    assert (await client.ask("what time?"))["text"] == "It is late."
    error = router.seen["default"][1].messages[-1]
    assert (
        error.is_error
        and "unknown tool 'frobnicate'" in error.content
        and "AgentTool" in error.content
    )
    assert '"timezone": "UTC"' in router.seen["default"][2].messages[-1].content


async def test_worker_cannot_call_a_tool_outside_its_allowlist(
    start: Start, session: ClientSession, probe: Probe
) -> None:
    router = Router(
        default=[Reply(calls=[dispatch("specialist-a", TASK)]), Reply("ok")],
        specialist_a=[
            Reply(calls=[("calc", {"expression": "6*7"}), ("AgentTool", {})]),
            Reply("could not compute"),
        ],
    )
    app = await start(router)
    client = await connect(session, app)
    await client.hello()
    await client.ask("go")
    results = router.seen["specialist-a"][1].messages[-2:]
    assert all(m.is_error and "not available" in m.content for m in results)
    assert probe.calls == []  # calc never ran
    assert db_rows(app, "select tool_name, ok from audit_logs where tool_name='calc'") == [
        ("calc", 0)
    ]


async def test_bad_dispatches_are_readable_errors(
    start: Start, session: ClientSession, probe: Probe
) -> None:
    router = Router(
        default=[
            Reply(
                calls=[
                    dispatch("specialist-z", TASK),
                    dispatch("default", TASK),
                    dispatch("specialist-a", "   "),
                    dispatch("specialist-a", "capital of France?"),
                ]
            ),
            Reply("answered myself"),
        ]
    )
    app = await start(router)
    client = await connect(session, app)
    await client.hello()
    await client.ask("go")
    unknown, coordinator, empty, short = router.seen["default"][1].messages[-4:]
    assert (
        "unknown subagent_type 'specialist-z'" in unknown.content
        and "specialist-a" in unknown.content
    )
    assert "cannot be dispatched" in coordinator.content and "specialist-b" in coordinator.content
    assert "empty" in empty.content and "specialist-a" in empty.content
    assert "answer it directly" in short.content
    assert db_rows(
        app, "select count(*) from chat_sessions where parent_session_id is not null"
    ) == [(0,)]


async def test_identical_dispatches_are_joined_and_the_turn_cap_holds(
    start: Start, session: ClientSession, probe: Probe
) -> None:
    router = Router(
        default=[
            Reply(
                calls=[
                    dispatch("specialist-a", TASK),
                    dispatch("specialist-a", TASK),
                    dispatch("specialist-b", SUM),
                ]
            ),
            Reply("ok"),
        ],
        specialist_a=[Reply("one answer")],
    )
    app = await start(router, agent={"max_workers": 1})
    client = await connect(session, app)
    await client.hello()
    await client.ask("go")
    first, twin, capped = last_tool_results(router.seen["default"][1])
    assert first["task_id"] == twin["task_id"] and twin["result"] == "one answer"
    assert "limit is 1" in capped["text"]
    assert len(router.seen["specialist-a"]) == 1
    assert db_rows(
        app, "select count(*) from chat_sessions where parent_session_id is not null"
    ) == [(1,)]


async def test_a_final_equal_to_the_last_note_is_not_sent_twice(
    running: Running, tmp_path: Path, probe: Probe
) -> None:
    from adapters.base import ChatRef, InboundMessage
    from tests.fakes import RecordingChannel

    channel = RecordingChannel()
    router = Router(
        default=[Reply(calls=[("SendMessage", {"message": "All done: 42."})]), Reply("")]
    )
    app = await running(
        ScriptedProvider(router),
        registry=registry_with(probe),
        channels=[channel],
        personas={"dirs": [str(write_personas(tmp_path / "p"))]},
    )
    await app.gateway.handle(InboundMessage(ChatRef("fake", "c"), "u", "sum it", "e1", "m1"))
    await app.gateway.wait_idle()
    shown = [c for c in channel.calls if c.text == "All done: 42."]
    assert len(shown) == 1 and len([c for c in channel.calls if c.kind == "send"]) == 1
    assert json.loads('"ok"') == "ok"


async def test_a_specialists_display_hints_reach_the_user(
    start: Start, session: ClientSession, probe: Probe
) -> None:
    router = Router(
        default=[Reply(calls=[dispatch("specialist-b", SUM)]), Reply("Here is your order.")],
        specialist_b=[Reply(calls=[("make_card", {})]), Reply("made the card")],
    )
    app = await start(router)
    client = await connect(session, app)
    await client.hello()
    final = await client.ask("order it")
    assert final["display"] == [{"type": "card", "title": "Order 7"}]


async def test_a_background_task_joined_by_a_waiting_call_is_delivered_once(
    start: Start, session: ClientSession, probe: Probe
) -> None:
    gate = asyncio.Event()
    router = Router(
        default=[
            Reply(calls=[dispatch("specialist-a", TASK, background=True)]),
            Reply(calls=[dispatch("specialist-a", TASK)]),  # now wait for that same task
            Reply("The crew, as promised."),
        ],
        specialist_a=[Reply("Crew: Armstrong, Aldrin, Collins", wait=gate)],
    )
    app = await start(router)
    client = await connect(session, app)
    await client.hello()
    await client.send(type="message", text="look it up, then wait for it")
    # no event marks a join: poll the recorded state until the second call joins the task
    await eventually(lambda: any(task.waiters for task in app.workers.tasks.values()))
    gate.set()
    final = await client.until_type("message.completed")
    assert final["text"] == "The crew, as promised."
    assert last_tool_results(router.seen["default"][2])[0]["result"].startswith("Crew:")
    await settled(app)
    assert len(router.seen["default"]) == 3  # no second, unprompted follow-up turn


async def test_a_worker_that_cannot_start_fails_alone_and_the_app_lives_on(
    start: Start, session: ClientSession, probe: Probe, tmp_path: Path
) -> None:
    def later(request: ModelRequest) -> Reply:
        last = request.messages[-1].content
        return Reply("still here" if last == "are you alive?" else "A follow-up.")

    router = Router(
        default=[
            Reply(calls=[dispatch("specialist-a", TASK, background=True)]),
            Reply(calls=[dispatch("specialist-b", SUM, background=True)]),
            Reply("Both started."),
            *[later] * 4,
        ],
        specialist_a=[Reply(calls=[("slow_tool", {})]), Reply("slow done")],
    )
    app = await start(router, agent={"max_workers_total": 1})
    client = await connect(session, app)
    await client.hello()
    assert (await client.ask("start two"))["text"] == "Both started."
    await asyncio.wait_for(probe.slow_started.wait(), 5)
    (tmp_path / "personas" / "specialist-b.md").unlink()  # gone while it waits for a slot
    app.personas.load()
    probe.release.set()
    follow_ups: list[dict[str, Any]] = []
    while len(follow_ups) < 1:
        follow_ups.append(await client.until_type("message.completed"))
    failed = next(
        f
        for f in client.frames
        if f["type"] == "agent.finished" and f["subagent_type"] == "specialist-b"
    )
    assert failed["status"] == "failed"
    assert (await client.ask("are you alive?"))["text"] == "still here"
