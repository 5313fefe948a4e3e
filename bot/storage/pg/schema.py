"""The PostgreSQL schema: the SQLite schema's tables and columns, migrated forward under a lock.

Migrations v1-v8 are the PostgreSQL form of the SQLite ones with the same number
(`bot.storage.schema.MIGRATIONS`); from v9 on each is written once for both
(bot/storage/ddl.py). A database of either kind at version N has the same tables and columns
(tests/test_store_pg.py compares them, tests/test_store_schema.py with bot/storage/tables.py).
Differences, and why:
- timestamps stay ISO-8601 text and JSON stays text: rows read back the same from both
  backends (the admin views slice `created_at`, the audit keeps arguments byte for byte), and
  the store never queries inside them;
- `chat_sessions` and `turns` gain `seq` (an identity column): PostgreSQL has no rowid, and
  "the newest session / turn" needs the creation order (`tables.creation_order`). Queries
  never select it.

Several processes may start at once: each migration runs in its own transaction holding
`pg_advisory_xact_lock(MIGRATION_LOCK)`, and looks again under it for the version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.storage import ddl
from bot.storage.schema import now

if TYPE_CHECKING:
    from bot.storage.pg.conn import Conn

MIGRATION_LOCK = 0x67617465776179  # any constant key: "gateway" in hex; one per database
HIDDEN_COLUMNS = ("seq",)

_V1 = (
    """CREATE TABLE chat_sessions (
        id text PRIMARY KEY, agent_id text NOT NULL, parent_session_id text, channel text NOT NULL,
        conversation_key text NOT NULL, user_id text NOT NULL, status text NOT NULL,
        persona_version text, created_at text, updated_at text,
        seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE)""",
    "CREATE INDEX idx_chat_sessions_parent_session_id ON chat_sessions (parent_session_id)",
    "CREATE INDEX idx_session_key ON chat_sessions"
    " (channel, conversation_key, user_id, agent_id, status, seq)",
    """CREATE TABLE messages (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, session_id text NOT NULL,
        turn_id text NOT NULL, role text NOT NULL, content text NOT NULL, tool_calls text,
        tool_call_id text, name text, is_error integer NOT NULL, tokens_in integer,
        tokens_out integer, created_at text)""",
    "CREATE INDEX idx_messages_session_id ON messages (session_id, id)",
    """CREATE TABLE audit_logs (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, session_id text NOT NULL,
        turn_id text, call_id text NOT NULL, tool_name text NOT NULL, arguments text,
        result text, ok integer NOT NULL, duration_ms double precision, created_at text)""",
    "CREATE INDEX idx_audit_logs_session_id ON audit_logs (session_id)",
    """CREATE TABLE turns (
        id text PRIMARY KEY, session_id text NOT NULL, channel text, conversation_key text,
        inbound_event_ids text NOT NULL, placeholder text, status text NOT NULL,
        final_text text, error text, created_at text, finished_at text,
        seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE)""",
    """CREATE TABLE memories (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, user_id text NOT NULL,
        memory_type text, content text NOT NULL, category text, importance integer,
        created_at text, updated_at text)""",
    "CREATE INDEX idx_memories_user_id ON memories (user_id)",
    """CREATE TABLE usage (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, session_id text NOT NULL,
        turn_id text, provider text, model text, input_tokens integer, output_tokens integer,
        created_at text)""",
    "CREATE INDEX idx_usage_session_id ON usage (session_id)",
    "CREATE INDEX idx_usage_turn_id ON usage (turn_id)",
)
_V2 = (
    "ALTER TABLE chat_sessions ADD COLUMN title text",
    "ALTER TABLE audit_logs ADD COLUMN extra text",
)
_V3 = (
    "ALTER TABLE memories ADD COLUMN tenant text NOT NULL DEFAULT ''",
    "ALTER TABLE memories ADD COLUMN key text",
    "CREATE INDEX idx_memories_tenant_user_id_key ON memories (tenant, user_id, key)",
    """CREATE TABLE orders (
        id text PRIMARY KEY, tenant text NOT NULL, user_id text NOT NULL, session_id text,
        service text NOT NULL, category text, method text, amount double precision NOT NULL,
        currency text NOT NULL, status text NOT NULL, payment_url text, created_at text,
        expires_at text)""",
    "CREATE INDEX idx_orders_tenant_user_id ON orders (tenant, user_id)",
)
_V4 = (
    # expires_at: unix seconds on the server's clock, the same for every host
    """CREATE TABLE event_claims (
        event_id text PRIMARY KEY, expires_at double precision NOT NULL)""",
    "CREATE INDEX idx_event_claims_expires_at ON event_claims (expires_at)",
    "CREATE INDEX idx_turns_conversation_key ON turns (conversation_key, seq)",
    "CREATE INDEX idx_turns_status ON turns (status)",
)
_V5 = (
    # how often a turn interrupted by a crash was taken up again (SQLite's v5)
    "ALTER TABLE turns ADD COLUMN resume_attempts integer NOT NULL DEFAULT 0",
    "CREATE INDEX idx_chat_sessions_status ON chat_sessions (status)",
)
_V6 = (
    # the sessions API (adapters/api): sessions owned by an API key, and their transcript
    """CREATE TABLE api_sessions (
        id text PRIMARY KEY, key_id text NOT NULL, user_id text, created_at text NOT NULL)""",
    """CREATE TABLE api_messages (
        position bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, session_id text NOT NULL,
        message_id text NOT NULL, role text NOT NULL, text text NOT NULL, status text NOT NULL,
        reply_to text, display text, action text, seq integer NOT NULL, created_at text NOT NULL)""",
    "CREATE UNIQUE INDEX idx_api_messages_session_id_message_id"
    " ON api_messages (session_id, message_id)",
    "CREATE INDEX idx_api_messages_session_id_reply_to ON api_messages (session_id, reply_to)",
)
_V7 = (
    # a turn's user messages as the channel showed them (SQLite's v7; its backfill of older web
    # chat turns has nothing to do here: no PostgreSQL store predates it)
    "ALTER TABLE turns ADD COLUMN inbound_messages text",
    "CREATE INDEX idx_turns_session_id ON turns (session_id, seq)",
)
_V8 = (
    # quota windows (bot/pipeline/quota.py); expires_at: unix seconds
    """CREATE TABLE quota_counters (
        bucket text PRIMARY KEY, turns integer NOT NULL, tokens integer NOT NULL,
        expires_at double precision NOT NULL)""",
    "CREATE INDEX idx_quota_counters_expires_at ON quota_counters (expires_at)",
    "CREATE INDEX idx_usage_created_at ON usage (created_at)",
)
# never append: from v9 on, migrations are written once for both (bot/storage/ddl.py)
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    *(_V1, _V2, _V3, _V4, _V5, _V6, _V7, _V8),
    *(ddl.statements("postgresql", step) for step in ddl.STEPS),
)

_VERSIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, applied_at text)"
)


async def migrate(conn: Conn, *, target: int | None = None) -> list[int]:
    """Apply the migrations missing up to version `target` (default: all); returns those applied."""
    wanted = range(1, len(MIGRATIONS[:target]) + 1)
    have = await _versions(conn)
    if have and max(have) > len(MIGRATIONS):
        raise RuntimeError(
            f"database schema v{max(have)} is newer than this code (v{len(MIGRATIONS)}); "
            "upgrade the bot or point storage.url at another database"
        )
    applied: list[int] = []
    for version in wanted:
        if version in have:
            continue
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
            await conn.execute(_VERSIONS_TABLE)  # under the lock: CREATE IF NOT EXISTS races
            if await conn.fetchval("SELECT 1 FROM schema_migrations WHERE version = $1", version):
                continue  # another process applied it while we waited for the lock
            for statement in MIGRATIONS[version - 1]:
                await conn.execute(statement)
            await conn.execute("INSERT INTO schema_migrations VALUES ($1, $2)", version, now())
            applied.append(version)
    return applied


async def _versions(conn: Conn) -> set[int]:
    if await conn.fetchval("SELECT to_regclass('schema_migrations')") is None:
        return set()
    return {row[0] for row in await conn.fetch("SELECT version FROM schema_migrations")}
