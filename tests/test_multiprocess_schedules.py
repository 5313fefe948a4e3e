"""Scheduled messages with real `bot serve` processes on one SQLite file and one Redis, counted
on the widget (every frame a visitor's conversation got, replayed from Redis at the end):

- 3 processes, 200 schedules due in the same second: each sent exactly once;
- the process firing one frozen right after its message reached Redis, then killed: another
  process takes it over and the visitor sees that message once (the same message id), completed;
- a restart after downtime: each missed one-shot fired once, late, with the note; a `skip`
  one not at all.

The schedules are written into the shared database by the test, with the project's own store,
as `schedule_message` would write them (tests/test_schedules.py covers the tool itself).
"""

from __future__ import annotations

import asyncio
import json
import math
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.storage.backends import build_store
from bot.storage.schedules import ScheduleRow
from tests.conftest import ORIGIN
from tests.processes import (
    Frame,
    Gateway,
    frames_until,
    gateways,
    joined_logs,
    one_gateway,
    write_config,
)
from tests.redis_kit import URL, prefix
from tests.redis_proxy import HoldingProxy

__all__ = ["prefix"]
pytestmark = [pytest.mark.process, pytest.mark.timeout(900)]
WAIT_S = 180.0  # several `bot serve` on a loaded 2-core machine


def _config(folder: Path, prefix: str, **schedules: Any) -> Path:
    return write_config(
        folder,
        redis={"url": "${REDIS_URL}", "prefix": prefix, "lease_s": 2},
        schedules={"poll_s": 0.2, "lease_s": 3} | schedules,
    )


def _row(visitor: str, body: str, due: float, **values: Any) -> ScheduleRow:
    chat = {"channel": "websocket", "chat_id": f"v:{visitor}"}
    fields: dict[str, Any] = dict(
        id=uuid.uuid4().hex[:10], conversation_key=f"websocket:v:{visitor}",
        chat=json.dumps(chat), user_id=f"v:{visitor}", kind="text", body=body,
        spec=f"at:{due}", timezone="UTC", missed="late", status="active", next_at=due,
        occurrence=0, fence=0, lease_until=None, sending=None, failures=0, note=None,
        language=None, created_at=time.time(), fired_at=None,
    )  # fmt: skip
    return ScheduleRow(**(fields | values))


async def _add(folder: Path, rows: list[ScheduleRow]) -> None:
    async with build_store(folder / "bot.db", None) as store:
        for row in rows:
            assert (
                await store.add_schedule(row, max_per_user=1000, max_per_conversation=1000) is None
            )


async def _statuses(folder: Path) -> Counter[str]:
    async with build_store(folder / "bot.db", None) as store:
        return Counter(row.status for row in await store.recent_schedules(10_000))


async def _settled(folder: Path) -> int:
    async with build_store(folder / "bot.db", None) as store:
        rows = await store.recent_schedules(10_000)
    return sum(row.status != "active" or row.occurrence > 0 for row in rows)


async def _until_settled(folder: Path, count: int, gws: list[Gateway]) -> None:
    """Until `count` schedules have fired or finished (each one's send is over by then)."""
    try:
        async with asyncio.timeout(WAIT_S):
            while await _settled(folder) < count:  # noqa: ASYNC110 (another process's writes)
                await asyncio.sleep(0.2)  # a poll step of the shared database; nothing to wait on
    except TimeoutError:
        raise AssertionError(f"{await _statuses(folder)}\n{joined_logs(gws)}") from None


async def _replayed(session: aiohttp.ClientSession, gateway: Gateway, visitor: str) -> list[Frame]:
    """Every frame the visitor's conversation got so far, replayed from Redis by a new tab."""
    tab = await session.ws_connect(f"{gateway.url}/ws", headers={"Origin": ORIGIN})
    try:
        await tab.send_json({"type": "hello", "visitor_id": visitor, "resume_after": 0})
        [ready] = await frames_until(tab, lambda f: f["type"] == "ready")
        if not ready["seq"]:
            return []
        return await frames_until(tab, lambda f: f.get("seq") == ready["seq"])
    finally:
        await tab.close()


def _created_texts(frames: list[Frame]) -> Counter[str]:
    """How many distinct messages showed each text (a message posted again keeps its id)."""
    ids = {(f["message_id"], f["text"]) for f in frames if f["type"] == "message.created"}
    return Counter(text for _, text in ids)


async def test_three_processes_send_each_of_200_schedules_due_in_one_second_once(
    prefix: str, tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    config = _config(tmp_path, prefix, batch=10, concurrency=5)  # the three race for claims
    async with gateways(3, config, {"REDIS_URL": URL}) as gws:
        visitors = [f"sched-{uuid.uuid4().hex[:6]}-{n}" for n in range(20)]
        due = math.ceil(time.time()) + 2  # the same second for all 200
        rows = [_row(v, f"reminder {v} #{k}", due + 0.001 * k) for v in visitors for k in range(10)]
        await _add(tmp_path, rows)
        await _until_settled(tmp_path, 200, gws)
        assert await _statuses(tmp_path) == Counter(done=200)
        counts: Counter[str] = Counter()
        for n, visitor in enumerate(visitors):
            counts += _created_texts(await _replayed(session, gws[n % 3], visitor))
    assert counts == Counter({row.body: 1 for row in rows}), joined_logs(gws)


async def test_a_process_killed_while_sending_is_taken_over_and_the_message_shown_once(
    prefix: str, tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    config = _config(tmp_path, prefix)
    proxy = HoldingProxy(URL)
    proxy.freeze_after(b'"type":"message.created"')
    visitor = f"sched-kill-{uuid.uuid4().hex[:6]}"
    a_url = await proxy.start()
    async with one_gateway(config, {"REDIS_URL": a_url}) as a:
        await _add(tmp_path, [_row(visitor, "take your pills", time.time() + 1)])
        try:
            async with asyncio.timeout(WAIT_S):
                await proxy.frozen.wait()  # A posted the message, and hears nothing more
        except TimeoutError:
            raise AssertionError(joined_logs([a])) from None
        a.process.kill()  # SIGKILL, in the middle of the send: not completed, not settled
        await a.process.wait()
    assert await _statuses(tmp_path) == Counter(active=1)
    async with one_gateway(config, {"REDIS_URL": URL}) as b:
        await _until_settled(tmp_path, 1, [a, b])
        frames = await _replayed(session, b, visitor)
    await proxy.close()
    created = [f for f in frames if f["type"] == "message.created"]
    completed = [f for f in frames if f["type"] == "message.completed"]
    assert len(created) == 2, frames  # A's post, and B's post of the same message again
    assert {f["message_id"] for f in created} == {f["message_id"] for f in completed}
    assert [f["text"] for f in completed] == ["take your pills"]
    assert await _statuses(tmp_path) == Counter(done=1)


async def test_after_downtime_each_missed_one_shot_fires_once_late_with_the_note(
    prefix: str, tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    config = _config(tmp_path, prefix)
    visitor = f"sched-down-{uuid.uuid4().hex[:6]}"
    async with one_gateway(config, {"REDIS_URL": URL}):
        pass  # the database is made; then the bot is down for an hour
    hour_ago = time.time() - 3600
    late = [_row(visitor, f"missed {k}", hour_ago + 60 * k) for k in range(5)]
    skipped = _row(visitor, "skip me", hour_ago, missed="skip")
    recurring = _row(visitor, "every ten minutes", hour_ago, spec=f"every:600:{hour_ago}")
    await _add(tmp_path, [*late, skipped, recurring])
    async with gateways(2, config, {"REDIS_URL": URL}) as gws:
        await _until_settled(tmp_path, 7, gws)  # the recurring one stays active
        frames = await _replayed(session, gws[0], visitor)
    texts = [f["text"] for f in frames if f["type"] == "message.completed"]
    for row in late:
        [text] = [t for t in texts if t.endswith(row.body)]
        assert text.startswith("⏰ Late: this was due at ")
    assert not any("skip me" in t for t in texts)
    assert sum("every ten minutes" in t for t in texts) == 1  # once, not six catch-ups
    assert len(texts) == 6
    assert await _statuses(tmp_path) == Counter(done=6, active=1)


async def test_a_task_due_on_three_processes_runs_one_turn(
    prefix: str, tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    config = _config(tmp_path, prefix, batch=2, concurrency=1)
    async with gateways(3, config, {"REDIS_URL": URL}) as gws:
        visitors = [f"sched-task-{uuid.uuid4().hex[:6]}-{n}" for n in range(6)]
        due = math.ceil(time.time()) + 2
        await _add(tmp_path, [_row(v, "what time is it?", due, kind="task") for v in visitors])
        await _until_settled(tmp_path, 6, gws)
        for n, visitor in enumerate(visitors):
            tab = await session.ws_connect(f"{gws[n % 3].url}/ws", headers={"Origin": ORIGIN})
            await tab.send_json({"type": "hello", "visitor_id": visitor, "resume_after": 0})
            await frames_until(tab, lambda f: f["type"] == "message.completed", WAIT_S)
            await tab.close()
        for n, visitor in enumerate(visitors):
            frames = await _replayed(session, gws[n % 3], visitor)
            created = [f for f in frames if f["type"] == "message.created"]
            assert len(created) == 1, joined_logs(gws)  # one turn: its placeholder, answered
    async with build_store(tmp_path / "bot.db", None) as store:
        turns = [t for v in visitors for t in await store.recent_turns(
            channel="websocket", conversation_key=f"websocket:v:{v}", user_id=f"v:{v}"
        )]  # fmt: skip
    assert len(turns) == 6 and all(t.status == "completed" for t in turns)
