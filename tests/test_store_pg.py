"""PostgresStore's own matters: migrations (several processes at once), the SQLite schema's
columns, a clear refusal of what cannot be opened, and `bot sessions` on PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest
from sqlite_utils import Database

from agent.types import Message
from bot.runtime.config import ConfigError, load_config
from bot.storage import MIGRATIONS as SQLITE_MIGRATIONS
from bot.storage import SqliteStore, StorageError
from bot.storage.pg import MIGRATIONS, PostgresStore, migrate
from bot.storage.pg.faults import redacted
from bot.storage.pg.schema import HIDDEN_COLUMNS
from tests.pg_kit import pg_database, pg_url
from tests.test_storage import SMALL_CACHE

__all__ = ["pg_database", "pg_url"]
ROOT = Path(__file__).resolve().parent.parent


async def _versions(url: str) -> list[int]:
    conn = await asyncpg.connect(url)
    try:
        return [r[0] for r in await conn.fetch("SELECT version FROM schema_migrations ORDER BY 1")]
    finally:
        await conn.close()


async def test_processes_starting_at_once_migrate_once_and_all_open(pg_url: str) -> None:
    stores = [PostgresStore(pg_url) for _ in range(6)]  # six pools: six processes to the server
    await asyncio.gather(*(store.open() for store in stores))
    try:
        assert await _versions(pg_url) == list(range(1, len(MIGRATIONS) + 1))
        key = {"channel": "c", "conversation_key": "k", "user_id": "u"}
        assert len({await store.active_session(**key) for store in stores}) == 1
    finally:
        await asyncio.gather(*(store.close() for store in stores))


async def test_the_tables_and_columns_are_the_sqlite_schemas(pg_url: str, tmp_path: Path) -> None:
    assert len(MIGRATIONS) == len(SQLITE_MIGRATIONS), "a migration is missing on one backend"
    async with SqliteStore(tmp_path / "bot.db"):
        pass
    with Database(tmp_path / "bot.db") as db:
        # sqlite_* tables are SQLite's own (sqlite_stat1: what ANALYZE or PRAGMA optimize learnt)
        sqlite = {
            t.name: {c.name for c in t.columns}
            for t in db.tables
            if not t.name.startswith("sqlite_")
        }
    async with PostgresStore(pg_url):
        pass
    conn = await asyncpg.connect(pg_url)
    try:
        rows = await conn.fetch(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = 'public'"
        )
    finally:
        await conn.close()
    postgres: dict[str, set[str]] = {}
    for row in rows:
        table, column = row["table_name"], row["column_name"]
        # a hidden column stands in for SQLite's rowid, unless the table has one of that name
        if column not in HIDDEN_COLUMNS or column in sqlite.get(table, ()):
            postgres.setdefault(table, set()).add(column)
    assert postgres == sqlite


async def test_a_v1_database_gains_the_later_columns_and_keeps_its_rows(pg_url: str) -> None:
    conn = await asyncpg.connect(pg_url)
    try:
        assert await migrate(conn, target=1) == [1]
        await conn.execute(
            "INSERT INTO memories (user_id, memory_type, content, importance)"
            " VALUES ('u1', 'fact', 'likes tea', 3)"
        )
    finally:
        await conn.close()
    async with PostgresStore(pg_url) as store:
        [row] = await store.list_memories(tenant="", user_id="u1")
        assert (row.content, row.tenant, row.key) == ("likes tea", "", None)
    assert await _versions(pg_url) == list(range(1, len(SQLITE_MIGRATIONS) + 1))


async def test_a_database_newer_than_the_code_is_refused(pg_url: str) -> None:
    async with PostgresStore(pg_url):
        pass
    conn = await asyncpg.connect(pg_url)
    await conn.execute("INSERT INTO schema_migrations VALUES (99, 'later')")
    await conn.close()
    with pytest.raises(RuntimeError, match="v99 is newer than this code"):
        await PostgresStore(pg_url).open()


async def test_no_server_is_a_storage_error_that_hides_the_password() -> None:
    with pytest.raises(StorageError) as caught:
        await PostgresStore("postgresql://bot:hunter2@127.0.0.1:9/gw", connect_timeout_s=2).open()
    assert "hunter2" not in str(caught.value) and "bot:***@127.0.0.1:9" in str(caught.value)
    assert redacted("postgresql://h/db?user=bot&password=hunter2&x=1") == (
        "postgresql://h/db?user=bot&password=***&x=1"
    )


def _bot(*args: str, cwd: Path, url: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "DATABASE_URL": url},
    )


@pytest.mark.process
def test_bot_chat_and_sessions_work_on_postgresql(pg_url: str, tmp_path: Path) -> None:
    # storage.path names a folder that does not exist: with a url it is not used
    config = {"storage": {"url": "${DATABASE_URL}", "path": "nowhere/at/all.db"}}
    (tmp_path / "config.yaml").write_text(json.dumps(config))
    chat = _bot("chat", cwd=tmp_path, url=pg_url, stdin="hello over postgres\n")
    assert chat.returncode == 0, chat.stderr
    assert not (tmp_path / "nowhere").exists()
    listing = _bot("sessions", "list", cwd=tmp_path, url=pg_url)
    assert listing.returncode == 0, listing.stderr
    [header, row] = listing.stdout.splitlines()
    assert "terminal:local" in row
    tree = _bot("sessions", "show", row.split()[0], cwd=tmp_path, url=pg_url)
    assert tree.returncode == 0, tree.stderr
    assert tree.stdout.startswith("session ") and "messages=2" in tree.stdout
    down = _bot("sessions", "list", cwd=tmp_path, url="postgresql://bot:pw@127.0.0.1:9/gw")
    assert down.returncode == 2 and "cannot open the database" in down.stderr
    assert "pw@" not in down.stderr


@pytest.mark.process
def test_an_unreachable_storage_url_stops_the_start_with_one_line(tmp_path: Path) -> None:
    config = {
        "storage": {"url": "${DATABASE_URL}"},
        "server": {"port": 0},
        "log": {"level": "WARNING"},
    }
    (tmp_path / "config.yaml").write_text(json.dumps(config))
    result = subprocess.run(
        [sys.executable, "-m", "bot", "serve"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=30,
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(ROOT),
            "DATABASE_URL": "postgresql://bot:hunter2@127.0.0.1:9/gw",
        },
    )
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: storage.url: cannot open the database"), line
    assert "bot:***@127.0.0.1:9/gw" in line and "hunter2" not in line


def test_storage_url_must_be_postgresql_and_is_never_echoed(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text('storage: {url: "mysql://bot:hunter2@db/gw"}')
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "config.yaml", env={})
    assert str(caught.value).endswith(
        "storage.url: expected a postgresql:// url such as postgresql://db.internal:5432/bot"
        " (leave it unset for SQLite at storage.path)"
    )
    assert "hunter2" not in str(caught.value)
    (tmp_path / "config.yaml").write_text('storage: {url: "${DATABASE_URL:-}"}')
    assert load_config(tmp_path / "config.yaml", env={}).storage.url is None  # unset: SQLite


async def test_the_history_cache_evicts_and_stays_consistent(pg_url: str) -> None:
    """As test_storage.py's for SQLite: a cache of ~2 sessions, a third, and another process."""
    key = {"channel": "websocket", "conversation_key": "chat-1"}
    async with PostgresStore(pg_url, **SMALL_CACHE) as store, PostgresStore(pg_url) as other:
        sessions = [await store.active_session(**key, user_id=f"u{i}") for i in range(3)]
        for session_id in sessions:
            await store.load_history(session_id)
        expected: list[list[tuple[str, Message]]] = [[], [], []]
        for n in range(9):
            await store.append_messages(sessions[n % 3], f"t{n}", [Message("user", str(n))])
            expected[n % 3].append((f"t{n}", Message("user", str(n))))
        history = await store.load_history(sessions[0])
        history.append(("mine", Message("user", "callers may not change the cache")))
        await other.append_messages(sessions[0], "t9", [Message("user", "from elsewhere")])
        await store.append_messages(sessions[0], "t10", [Message("user", "back here")])
        expected[0] += [
            ("t9", Message("user", "from elsewhere")),
            ("t10", Message("user", "back here")),
        ]
        for n, session_id in enumerate(sessions):
            assert await store.load_history(session_id) == expected[n]
            assert await other.load_history(session_id) == expected[n]
        assert len(store._histories) < 3
