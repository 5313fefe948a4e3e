"""The schema described once (bot/storage/tables.py) is the one both backends' migrations make,
and a database of the schema before it (v8) migrates forward keeping its rows."""

from __future__ import annotations

from pathlib import Path

import asyncpg
from sqlite_utils import Database

from agent.types import Message
from bot.storage import SqliteStore
from bot.storage import migrate as migrate_sqlite
from bot.storage.pg import PostgresStore
from bot.storage.pg import migrate as migrate_pg
from bot.storage.pg.schema import HIDDEN_COLUMNS
from bot.storage.rows import ConversationStateRow
from bot.storage.tables import metadata
from tests.pg_kit import pg_database, pg_url

__all__ = ["pg_database", "pg_url"]

Columns = dict[str, dict[str, bool]]  # table -> column -> nullable
DESCRIBED: Columns = {
    table.name: {c.name: bool(c.nullable) for c in table.columns}
    for table in metadata.sorted_tables
}
# today's rows (v8), written as today's code wrote them
V8_ROWS = (
    "INSERT INTO chat_sessions (id, agent_id, channel, conversation_key, user_id, status,"
    " created_at, updated_at) VALUES ('s1', 'default', 'telegram', 'telegram:1', 'u1',"
    " 'active', '2026-01-01', '2026-01-01')",
    "INSERT INTO messages (session_id, turn_id, role, content, is_error, created_at)"
    " VALUES ('s1', 't1', 'user', 'hello from v8', 0, '2026-01-01')",
    "INSERT INTO turns (id, session_id, channel, conversation_key, inbound_event_ids, status)"
    " VALUES ('t1', 's1', 'telegram', 'telegram:1', '[\"e1\"]', 'completed')",
)
STATE = ConversationStateRow("telegram:1", "agent", None, {}, 1, 0.0)


def _sqlite_columns(path: Path) -> Columns:
    with Database(path) as db:
        return {
            t.name: {c.name: not (c.notnull or c.is_pk) for c in t.columns}
            for t in db.tables
            if not t.name.startswith("sqlite_") and t.name != "schema_migrations"
        }


async def _pg_columns(url: str) -> Columns:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT table_name, column_name, is_nullable FROM information_schema.columns"
            " WHERE table_schema = 'public' AND table_name != 'schema_migrations'"
        )
    finally:
        await conn.close()
    found: Columns = {}
    for table, column, nullable in rows:
        if column not in HIDDEN_COLUMNS or table == "api_messages":  # its own `seq`
            found.setdefault(table, {})[column] = nullable == "YES"
    return found


async def test_sqlite_migrations_make_the_described_schema(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "bot.db"):
        pass
    assert _sqlite_columns(tmp_path / "bot.db") == DESCRIBED


async def test_postgresql_migrations_make_the_described_schema(pg_url: str) -> None:
    async with PostgresStore(pg_url):
        pass
    assert await _pg_columns(pg_url) == DESCRIBED


async def _read_back(store: SqliteStore | PostgresStore) -> None:
    assert await store.load_history("s1") == [("t1", Message("user", "hello from v8"))]
    turn = await store.get_turn("t1")
    assert turn is not None and turn.inbound_event_ids == ("e1",)
    assert await store.save_conversation_state(STATE, expected_version=0)  # the new tables
    await store.put_blob("b1", "text/plain", b"x")


async def test_a_v8_sqlite_database_migrates_forward_keeping_its_rows(tmp_path: Path) -> None:
    with Database(tmp_path / "bot.db") as db:
        assert migrate_sqlite(db, target=8) == list(range(1, 9))
        for statement in V8_ROWS:
            db.execute(statement)
        db.conn.commit()
    async with SqliteStore(tmp_path / "bot.db") as store:
        await _read_back(store)
    assert _sqlite_columns(tmp_path / "bot.db") == DESCRIBED


async def test_a_v8_postgresql_database_migrates_forward_keeping_its_rows(pg_url: str) -> None:
    conn = await asyncpg.connect(pg_url)
    try:
        assert await migrate_pg(conn, target=8) == list(range(1, 9))
        for statement in V8_ROWS:
            await conn.execute(statement)
    finally:
        await conn.close()
    async with PostgresStore(pg_url) as store:
        await _read_back(store)
    assert await _pg_columns(pg_url) == DESCRIBED
