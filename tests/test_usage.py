"""`bot usage`: tokens, calls and cost from `usage.prices`, grouped, as a table and as JSON."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from bot.reports.usage import format_report, usage_report
from bot.storage import SqliteStore
from tests.test_cli import _bot

PRICES = {
    "big-model": {"input_per_mtok": 3.0, "output_per_mtok": 15.0},
    "small-model": {"input_per_mtok": 0.1, "output_per_mtok": 0.4},
}


@pytest.fixture
async def folder(tmp_path: Path) -> Path:
    """A config with prices and a database with usage over two days, two users, two channels."""
    config = {"storage": {"path": str(tmp_path / "bot.db")}, "usage": {"prices": PRICES}}
    (tmp_path / "config.yaml").write_text(json.dumps(config))
    async with SqliteStore(tmp_path / "bot.db") as store:
        alice = await store.create_session(
            agent_id="default", channel="telegram", conversation_key="telegram:1", user_id="alice"
        )
        bob = await store.create_session(
            agent_id="default", channel="web", conversation_key="web:v", user_id="bob"
        )
        worker = await store.create_session(  # a specialist's calls count for its user
            agent_id="specialist-research",
            channel="telegram",
            conversation_key="telegram:1",
            user_id="alice",
            parent_session_id=alice,
        )
        calls = [
            (alice, "openai", "big-model", 1_000_000, 100_000),
            (alice, "openai", "small-model", 2_000_000, 500_000),
            (worker, "openai", "big-model", 500_000, 0),
            (bob, "local", "free-model", 10, 5),
        ]
        for session_id, provider, model, tokens_in, tokens_out in calls:
            await store.record_usage(
                session_id=session_id,
                turn_id="t",
                provider=provider,
                model=model,
                input_tokens=tokens_in,
                output_tokens=tokens_out,
            )
    with sqlite3.connect(tmp_path / "bot.db") as db:  # the first call happened a day earlier
        db.execute("UPDATE usage SET created_at = '2026-03-01T10:00:00+00:00' WHERE id = 1")
        db.execute("UPDATE usage SET created_at = '2026-03-02T10:00:00+00:00' WHERE id > 1")
    return tmp_path


@pytest.mark.process
def test_usage_by_model_prints_a_table_with_cost_from_the_price_table(folder: Path) -> None:
    result = _bot("usage", cwd=folder)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["model", "calls", "tokens", "in", "tokens", "out", "cost"]
    # big-model: 1.5M in x $3 + 0.1M out x $15 = 6.0; small: 2M x 0.1 + 0.5M x 0.4 = 0.4
    assert lines[1].split() == ["big-model", "2", "1,500,000", "100,000", "6.0000"]
    assert lines[2].split() == ["small-model", "1", "2,000,000", "500,000", "0.4000"]
    assert lines[3].split() == ["free-model", "1", "10", "5", "-"]
    assert lines[4].split() == ["total", "4", "3,500,010", "600,005", "-"]
    assert lines[5] == "no price in usage.prices for: free-model"


@pytest.mark.process
def test_usage_json_by_user_since_a_date(folder: Path) -> None:
    result = _bot("usage", "--by", "user", "--since", "2026-03-02", "--json", cwd=folder)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["by"] == ["user"] and report["since"] == "2026-03-02"
    assert report["rows"] == [
        {
            "user": "telegram:alice",
            "calls": 2,
            "input_tokens": 2_500_000,
            "output_tokens": 500_000,
            "cost": pytest.approx(1.9),  # small 0.4 + the specialist's big 1.5
        },
        {"user": "web:bob", "calls": 1, "input_tokens": 10, "output_tokens": 5, "cost": None},
    ]
    assert report["total"]["calls"] == 3 and report["unpriced_models"] == ["free-model"]


@pytest.mark.process
def test_usage_by_day_and_by_channel(folder: Path) -> None:
    days = _bot("usage", "--by", "day", cwd=folder)
    assert [line.split()[:2] for line in days.stdout.splitlines()[1:3]] == [
        ["2026-03-01", "1"],
        ["2026-03-02", "3"],
    ]
    channels = json.loads(_bot("usage", "--by", "channel", "--json", cwd=folder).stdout)
    assert {r["channel"]: r["calls"] for r in channels["rows"]} == {"telegram": 3, "web": 1}


@pytest.mark.process
def test_usage_refuses_a_bad_date_and_a_missing_database(folder: Path, tmp_path: Path) -> None:
    bad = _bot("usage", "--since", "yesterday", cwd=folder)
    assert bad.returncode == 2 and "expected a date like 2026-01-31" in bad.stderr
    (folder / "bot.db").rename(folder / "moved.db")
    missing = _bot("usage", cwd=folder)
    assert missing.returncode == 2 and "no database at" in missing.stderr


async def test_a_user_id_cannot_send_escape_sequences_to_the_terminal(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "bot.db") as store:
        # an API client names its users: this one clears the screen and rewrites the table
        session = await store.create_session(
            agent_id="default", channel="api", conversation_key="api:s", user_id="a:\x1b[2J\rx"
        )
        await store.record_usage(
            session_id=session,
            turn_id="t",
            provider="p",
            model="m",
            input_tokens=1,
            output_tokens=1,
        )
        printed = format_report(await usage_report(store, {}, by=("user",)))
    assert "\x1b" not in printed and "\r" not in printed
    assert "api:a:\\x1b[2J\\rx" in printed  # shown, as text
