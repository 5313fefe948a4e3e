"""Scheduled messages through a running app: the model schedules with its tools, the runner
fires the occurrence into the widget's conversation as a new bot message, `/schedule` lists
and cancels, a missed occurrence goes out once with a note (or is skipped), and a schedule
whose channel is gone is disabled."""

from __future__ import annotations

import json
import time
from typing import Any

import aiohttp

from agent.providers.scripted import Reply, ScriptedProvider
from agent.types import ModelRequest
from bot.runtime.app import App
from bot.storage.schedules import ScheduleRow
from tests.conftest import Running, WsClient, connect, db_rows, eventually

FAST = {"poll_s": 0.05, "min_interval_s": 60}
WAIT_S = 30.0


def _completed_with(text: str) -> Any:
    return lambda f: f["type"] == "message.completed" and text in f["text"]


async def _visitor(app: App, session: aiohttp.ClientSession) -> tuple[WsClient, str]:
    client = await connect(session, app)
    await client.hello()
    await client.ask("hi")
    await app.gateway.wait_idle()
    [(key,)] = db_rows(app, "select conversation_key from turns limit 1")
    return client, key


def _row(key: str, n: str, *, due: float, spec: str | None = None, **values: Any) -> ScheduleRow:
    chat = {"channel": key.split(":", 1)[0], "chat_id": key.split(":", 1)[1]}
    fields: dict[str, Any] = dict(
        id=n, conversation_key=key, chat=json.dumps(chat), user_id="v:visitor-0001", kind="text",
        body=f"message {n}", spec=spec or f"at:{due}", timezone="Europe/Berlin", missed="late",
        status="active", next_at=due, occurrence=0, fence=0, lease_until=None, sending=None,
        failures=0, note=None, language=None, created_at=time.time(), fired_at=None,
    )  # fmt: skip
    return ScheduleRow(**(fields | values))


async def test_the_model_schedules_a_reminder_that_arrives_once_as_a_new_message(
    running: Running, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider(
        [
            Reply("hello"),
            Reply(calls=[("schedule_message", {"when": "in 1 second", "text": "Stretch! 🧘"})]),
            Reply("I will remind you."),
        ]
    )
    app = await running(provider, schedules=FAST)
    client, key = await _visitor(app, session)
    answer = await client.ask("remind me in a second to stretch")
    assert answer["text"] == "I will remind you."
    tool_result = provider.requests[-1].messages[-1].content
    assert '"success": true' in tool_result, tool_result
    reminder = await client.until(_completed_with("Stretch! 🧘"), WAIT_S)
    assert reminder["text"] == "Stretch! 🧘"  # as is: on time, no note
    assert reminder.get("reply_to") is None
    await eventually(
        lambda: db_rows(app, "select status, occurrence from schedules") == [("done", 1)]
    )
    shown = [
        f for f in client.frames if f["type"] == "message.created" and f["text"] == "Stretch! 🧘"
    ]
    assert len(shown) == 1 and len(provider.requests) == 3  # a text is sent without the model
    assert key.startswith("websocket:")


async def test_a_task_runs_the_coordinator_at_its_time_and_posts_the_answer(
    running: Running, session: aiohttp.ClientSession
) -> None:
    def script(request: ModelRequest) -> Reply:
        last = request.messages[-1]
        if last.role == "user" and last.content == "watch the orders":
            return Reply(
                calls=[("schedule_message", {"when": "in 1s", "task": "list open orders"})]
            )
        if last.role == "tool":
            return Reply("Scheduled.")
        if "list open orders" in last.content and "scheduled earlier" in last.content:
            return Reply("Open orders: none today.")
        return Reply("hello")

    provider = ScriptedProvider(script)
    app = await running(provider, schedules=FAST)
    client, _ = await _visitor(app, session)
    assert (await client.ask("watch the orders"))["text"] == "Scheduled."
    posted = await client.until(_completed_with("Open orders: none today."), WAIT_S)
    created = await client.seen(
        lambda f: f["type"] == "message.created" and f["message_id"] == posted["message_id"]
    )
    assert created["message_id"] == posted["message_id"]  # the task's own placeholder, edited
    await app.gateway.wait_idle()
    events = db_rows(app, "select inbound_event_ids from turns order by rowid")
    assert sum("schedule:" in e for (e,) in events) == 1
    task_calls = [
        r
        for r in provider.requests
        if r.messages[-1].role == "user" and "list open orders" in r.messages[-1].content
    ]
    assert len(task_calls) == 1
    assert "schedule_message" in {t.name for t in task_calls[0].tools}  # the persona's tools


async def test_schedule_command_lists_and_cancels_only_this_conversation(
    running: Running, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider(
        [
            Reply("hello"),
            Reply(calls=[("schedule_message", {"when": "every weekday at 9", "text": "Stand-up"})]),
            Reply("Done."),
        ]
    )
    app = await running(provider, schedules=FAST)
    client, key = await _visitor(app, session)
    await client.ask("stand-up reminder every weekday at 9")
    [(schedule_id, spec, zone)] = db_rows(app, "select id, spec, timezone from schedules")
    assert spec == "cron:0 9 * * 1-5" and zone == "UTC"
    listing = await client.ask("/schedule")
    assert schedule_id in listing["text"] and "Stand-up" in listing["text"]
    other = await connect(session, app)
    await other.hello("visitor-0002")
    refused = await other.ask(f"/schedule cancel {schedule_id}")
    assert "No active schedule" in refused["text"]
    cancelled = await client.ask(f"/schedule cancel {schedule_id}")
    assert "Cancelled" in cancelled["text"]
    assert db_rows(app, "select status from schedules") == [("cancelled",)]
    assert "Nothing is scheduled" in (await client.ask("/schedule"))["text"]


async def test_limits_and_runaway_recurrences_are_refused(
    running: Running, session: aiohttp.ClientSession
) -> None:
    calls = [
        ("schedule_message", {"when": "* * * * *", "text": "spam"}),  # every minute < 5 min
        ("schedule_message", {"when": "in 1 hour", "text": "one"}),
        ("schedule_message", {"when": "in 2 hours", "text": "two"}),  # over the count
        ("schedule_message", {"when": "yesterday", "text": "never"}),
    ]
    provider = ScriptedProvider(
        [Reply("hello"), *(r for c in calls for r in (Reply(calls=[c]), Reply("ok")))]
    )
    app = await running(provider, schedules={"min_interval_s": 300, "max_per_conversation": 1})
    client, _ = await _visitor(app, session)
    for _ in calls:
        await client.ask("schedule")
    results = [r.messages[-1].content for r in provider.requests if r.messages[-1].role == "tool"]
    assert "shortest interval allowed here is 300 s" in results[0]
    assert '"success": true' in results[1]
    assert "1 active schedules, the most allowed" in results[2]
    assert "cannot read the time 'yesterday'" in results[3]
    assert db_rows(app, "select body from schedules") == [("one",)]


async def test_missed_occurrences_fire_once_late_with_a_note_or_are_skipped(
    running: Running, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("hello")])
    app = await running(provider, schedules=FAST)
    client, key = await _visitor(app, session)
    hour_ago = time.time() - 3600
    every_10 = f"every:600:{hour_ago - 600 * 3}"  # 6 occurrences missed in the hour
    for row in (
        _row(key, "late1", due=hour_ago),
        _row(key, "skip1", due=hour_ago, missed="skip"),
        _row(key, "rec1", due=hour_ago, spec=every_10),
        _row(key, "gone1", due=hour_ago, chat=json.dumps({"channel": "telegram", "chat_id": "7"})),
    ):
        assert await app.store.add_schedule(row, max_per_user=9, max_per_conversation=9) is None
    late = await client.until(_completed_with("message late1"), WAIT_S)
    assert (
        late["text"].startswith("⏰ Late: this was due at ")
        and "(Europe/Berlin)" not in late["text"]
    )
    await client.until(_completed_with("message rec1"), WAIT_S)
    await eventually(
        lambda: (
            not db_rows(
                app,
                "select id from schedules where sending is not null or next_at < 1e10 and next_at < strftime('%s','now')",
            )
        ),
        WAIT_S,
    )
    rows = {
        r[0]: r[1:] for r in db_rows(app, "select id, status, occurrence, next_at from schedules")
    }
    assert rows["late1"][:2] == ("done", 1)
    assert rows["skip1"][:2] == ("done", 1)
    assert rows["rec1"][:2] == ("active", 1) and rows["rec1"][2] > time.time()  # no catch-up
    assert rows["gone1"][:2] == ("disabled", 0)
    texts = [f["text"] for f in client.frames if f["type"] == "message.completed"]
    assert not any("message skip1" in t for t in texts)
    assert sum("message rec1" in t for t in texts) == 1


async def test_a_zone_the_user_names_is_kept_for_the_next_schedules(
    running: Running, session: aiohttp.ClientSession
) -> None:
    calls = [
        {"when": "every day at 9", "text": "one", "timezone": "asia/tokyo"},  # lower case too
        {"when": "every day at 10", "text": "two"},
        {"when": "in 1 hour", "text": "three", "timezone": "Mars/Base"},
    ]
    provider = ScriptedProvider(
        [
            Reply("hello"),
            *(r for c in calls for r in (Reply(calls=[("schedule_message", c)]), Reply("ok"))),
        ]
    )
    app = await running(provider, schedules=FAST)
    client, key = await _visitor(app, session)
    for _ in calls:
        await client.ask("schedule")
    assert db_rows(app, "select body, timezone from schedules order by created_at") == [
        ("one", "Asia/Tokyo"),
        ("two", "Asia/Tokyo"),
    ]
    assert (await app.gateway.states.get(key)).settings["timezone"] == "Asia/Tokyo"
    refused = [r.messages[-1].content for r in provider.requests if r.messages[-1].role == "tool"]
    assert "unknown time zone 'Mars/Base'" in refused[-1]


async def test_a_schedule_of_a_user_no_longer_allowed_is_disabled_not_sent(
    running: Running, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("hello")])
    gateway = {"allowed_users": ["v:visitor-0001"]}
    app = await running(provider, schedules=FAST, gateway=gateway)
    client, key = await _visitor(app, session)
    due = time.time()
    for row in (_row(key, "kept", due=due), _row(key, "gone", due=due, user_id="v:removed")):
        assert await app.store.add_schedule(row, max_per_user=9, max_per_conversation=9) is None
    await client.until(_completed_with("message kept"), WAIT_S)
    await eventually(lambda: ("disabled",) in db_rows(app, "select status from schedules"), WAIT_S)
    assert db_rows(app, "select id, status, note from schedules order by id") == [
        ("gone", "disabled", "its author is not allowed in this chat any more"),
        ("kept", "done", None),
    ]
    assert not [f for f in client.frames if "message gone" in str(f.get("text"))]
