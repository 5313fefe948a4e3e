"""Scheduled messages on Telegram, through aiogram against the fake Bot API: the reminder is a
new message in the chat (not a reply), sent once; a chat whose user blocked the bot disables
its schedule instead of retrying it forever; a 429 waits as the platform asked, counting no
failure."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from agent.providers.scripted import Reply, ScriptedProvider
from bot.runtime.app import App
from bot.storage.schedules import ScheduleRow
from tests.conftest import make_config
from tests.telegram_fake import TOKEN, FakeBotAPI

WAIT_S = 30.0


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotAPI]:
    api = FakeBotAPI(interval_s=0.2)
    await api.start()
    yield api
    await api.close()


@pytest.fixture
async def app(tmp_path: Path, fake: FakeBotAPI) -> AsyncIterator[App]:
    provider = ScriptedProvider(
        [
            Reply(calls=[("schedule_message", {"when": "in 1 second", "text": "Drink water 💧"})]),
            Reply("I will remind you."),
        ]
    )
    channel = {
        "enabled": True,
        "token": TOKEN,
        "api_base": fake.url,
        "private_edit_interval_s": 0.2,
    }
    schedules = {"poll_s": 0.05, "max_failures": 1}
    config = make_config(tmp_path, channels={"telegram": channel}, schedules=schedules)
    started = App(config, base_dir=tmp_path, provider=provider)
    await started.__aenter__()
    await fake.wait_for(lambda: any(c.method == "getupdates" for c in fake.calls))
    yield started
    await started.stop()


def _row(n: str, chat: int, **values: Any) -> ScheduleRow:
    now = time.time()
    fields: dict[str, Any] = dict(
        id=n, conversation_key=f"telegram:{chat}",
        chat=json.dumps({"channel": "telegram", "chat_id": str(chat)}), user_id=str(chat),
        kind="text", body=f"message {n}", spec=f"at:{now}", timezone="UTC", missed="late",
        status="active", next_at=now, occurrence=0, fence=0, lease_until=None, sending=None,
        failures=0, note=None, language=None, created_at=now, fired_at=None,
    )  # fmt: skip
    return ScheduleRow(**(fields | values))


async def _until(app: App, schedule_id: str, check: Callable[[ScheduleRow], bool]) -> ScheduleRow:
    """The row once `check` holds (the runner writes it; no event marks that)."""
    async with asyncio.timeout(WAIT_S):
        while True:
            row = await app.store.get_schedule(schedule_id)
            if row is not None and check(row):
                return row
            await asyncio.sleep(0.05)  # noqa: ASYNC110 (a poll step of the store)


async def test_a_reminder_is_one_new_message_in_the_chat(app: App, fake: FakeBotAPI) -> None:
    fake.push(fake.message(42, "remind me in a second to drink water"))
    [row] = await _rows_soon(app)
    await _until(app, row.id, lambda r: r.status == "done")
    reminders = [c for c in fake.ok(42, "sendMessage") if c.text == "Drink water 💧"]
    assert len(reminders) == 1
    assert "reply_parameters" not in reminders[0].params  # a message of its own, not a reply


async def _rows_soon(app: App) -> list[ScheduleRow]:
    async with asyncio.timeout(WAIT_S):
        while not (rows := await app.store.recent_schedules()):  # noqa: ASYNC110 (the store)
            await asyncio.sleep(0.05)
    return rows


async def test_a_chat_that_blocked_the_bot_disables_its_schedule(
    app: App, fake: FakeBotAPI
) -> None:
    fake.refuse["sendmessage"] = (403, "Forbidden: bot was blocked by the user")
    await app.store.add_schedule(_row("blocked", 77), max_per_user=9, max_per_conversation=9)
    row = await _until(app, "blocked", lambda r: r.status != "active")
    assert row.status == "disabled" and "blocked by the user" in (row.note or "")
    assert [c.status for c in fake.to_chat(77, "sendMessage")] == [403]  # once, never again


async def test_a_429_waits_as_asked_and_counts_no_failure(app: App, fake: FakeBotAPI) -> None:
    fake.force_429(55, 30)
    await app.store.add_schedule(_row("limited", 55), max_per_user=9, max_per_conversation=9)
    row = await _until(app, "limited", lambda r: r.lease_until is None and r.note is not None)
    assert (row.status, row.failures, row.occurrence) == ("active", 0, 0)
    assert row.next_at is not None and row.next_at > time.time() + 20  # the platform's 30 s
    assert not fake.ok(55, "sendMessage")
