"""The store's schema on SQLite: forward migrations, status vocabularies, timestamps."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.schema import ExecutableDDLElement
from sqlite_utils import Database

from bot.storage import ddl

SESSION_STATUSES = frozenset(
    {"active", "closed", "running", "completed", "failed", "killed", "timeout"}
)
# waiting: paused for a person's approval (bot/approvals/), resumed once it is answered
TURN_STATUSES = frozenset({"running", "completed", "failed", "stopped", "waiting"})


_SECOND: list[Any] = [-1, ""]  # the last whole second `now` formatted, and its text


def now() -> str:
    """The time as stored: ISO 8601 in UTC, to the microsecond (`datetime.isoformat`'s form).

    The second's text is formatted once a second (isoformat formats through C's sprintf, which
    made this ~3k instructions a call, and a turn stamps four rows).
    """
    second, ns = divmod(time.time_ns(), 1_000_000_000)
    if second != _SECOND[0]:
        _SECOND[:] = second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{_SECOND[1]}.{ns // 1000:06d}+00:00"


def check_status(status: str, allowed: frozenset[str], what: str) -> None:
    if status not in allowed:
        raise ValueError(f"unknown {what} status {status!r}; use one of {sorted(allowed)}")


# -- forward migrations, one transaction each; never edit one. v1-v8 as SQLite first had them;
# from v9 on a migration is written once for both backends (bot/storage/ddl.py, append there).
# Message ids are INTEGER PRIMARY KEY without AUTOINCREMENT: SQLite hands out max(id) + 1, and
# messages are never deleted, so ids grow, which the history cache relies on.
# fmt: off
def _v1_core_tables(db: Database) -> None:
    db.table("chat_sessions").create({
        "id": str, "agent_id": str, "parent_session_id": str, "channel": str,
        "conversation_key": str, "user_id": str, "status": str, "persona_version": str,
        "created_at": str, "updated_at": str,
    }, pk="id", not_null={"agent_id", "channel", "conversation_key", "user_id", "status"})
    db.table("chat_sessions").create_index(["parent_session_id"])
    db.table("chat_sessions").create_index(
        ["channel", "conversation_key", "user_id", "agent_id", "status"],
        index_name="idx_session_key",
    )
    db.table("messages").create({
        "id": int, "session_id": str, "turn_id": str, "role": str, "content": str,
        "tool_calls": str, "tool_call_id": str, "name": str, "is_error": int,
        "tokens_in": int, "tokens_out": int, "created_at": str,
    }, pk="id", not_null={"session_id", "turn_id", "role", "content", "is_error"})
    db.table("messages").create_index(["session_id"])
    db.table("audit_logs").create({
        "id": int, "session_id": str, "turn_id": str, "call_id": str, "tool_name": str,
        "arguments": str, "result": str, "ok": int, "duration_ms": float, "created_at": str,
    }, pk="id", not_null={"session_id", "call_id", "tool_name", "ok"})
    db.table("audit_logs").create_index(["session_id"])
    db.table("turns").create({
        "id": str, "session_id": str, "channel": str, "conversation_key": str,
        "inbound_event_ids": str, "placeholder": str, "status": str, "final_text": str,
        "error": str, "created_at": str, "finished_at": str,
    }, pk="id", not_null={"session_id", "inbound_event_ids", "status"})
    db.table("memories").create({
        "id": int, "user_id": str, "memory_type": str, "content": str, "category": str,
        "importance": int, "created_at": str, "updated_at": str,
    }, pk="id", not_null={"user_id", "content"})
    db.table("memories").create_index(["user_id"])
    db.table("usage").create({
        "id": int, "session_id": str, "turn_id": str, "provider": str, "model": str,
        "input_tokens": int, "output_tokens": int, "created_at": str,
    }, pk="id", not_null={"session_id"})
# fmt: on


def _v2_titles_and_audit_extra(db: Database) -> None:
    db.table("chat_sessions").add_column("title", str)
    db.table("audit_logs").add_column("extra", str)  # AuditRecord.extra, as JSON


def _v3_memory_scope_and_orders(db: Database) -> None:
    db.table("memories").add_column("tenant", str, not_null_default="")
    db.table("memories").add_column("key", str)  # e.g. "intake:age": a newer value replaces it
    db.table("memories").create_index(["tenant", "user_id", "key"])
    db.table("orders").create(
        {
            "id": str,
            "tenant": str,
            "user_id": str,
            "session_id": str,
            "service": str,
            "category": str,
            "method": str,
            "amount": float,
            "currency": str,
            "status": str,
            "payment_url": str,
            "created_at": str,
            "expires_at": str,
        },
        pk="id",
        not_null={"tenant", "user_id", "service", "amount", "currency", "status"},
    )
    db.table("orders").create_index(["tenant", "user_id"])


def _v4_event_claims(db: Database) -> None:
    # Claimed platform event ids with their expiry (unix seconds): a restart still knows them.
    db.table("event_claims").create(
        {"event_id": str, "expires_at": float}, pk="event_id", not_null={"expires_at"}
    )
    db.table("event_claims").create_index(["expires_at"])
    db.table("turns").create_index(["conversation_key"])  # a conversation's newest turn
    db.table("turns").create_index(["status"])  # unfinished turns, at start


def _v5_resume_attempts(db: Database) -> None:
    # How often a turn interrupted by a crash was taken up again: a turn that crashes the
    # process each time is given up after a few, not resumed forever.
    db.table("turns").add_column("resume_attempts", int, not_null_default=0)
    db.table("chat_sessions").create_index(["status"])  # specialists left running, at start


def _v6_api_sessions(db: Database) -> None:
    # The sessions API (adapters/api): sessions owned by an API key, and their transcript.
    db.table("api_sessions").create(
        {"id": str, "key_id": str, "user_id": str, "created_at": str},
        pk="id",
        not_null={"key_id", "created_at"},
    )
    db.table("api_messages").create(
        {
            "position": int,
            "session_id": str,
            "message_id": str,
            "role": str,
            "text": str,
            "status": str,
            "reply_to": str,
            "display": str,
            "action": str,
            "seq": int,
            "created_at": str,
        },
        pk="position",
        not_null={"session_id", "message_id", "role", "text", "status", "seq", "created_at"},
    )
    db.table("api_messages").create_index(["session_id", "message_id"], unique=True)
    db.table("api_messages").create_index(["session_id", "reply_to"])  # a resend finds its answer


def _v7_turn_inbound_messages(db: Database) -> None:
    # The user's messages of a turn as the channel showed them (`[{message_id, text}]`, JSON):
    # the transcript a reload shows comes from here, with the ids the client gave them.
    db.table("turns").add_column("inbound_messages", str)
    db.table("turns").create_index(["session_id"])  # a session's turns, for the transcript
    # Web chat turns from before: their stored user message, with the client's id where the
    # event id carries it (`ws:<conversation>:<client_message_id>`), so a reload shows them too.
    rows = db.execute(
        "SELECT t.id, t.conversation_key, t.inbound_event_ids, m.content FROM turns t"
        " JOIN messages m ON m.id = (SELECT min(id) FROM messages WHERE session_id = t.session_id"
        " AND turn_id = t.id AND role = 'user') WHERE t.channel = 'websocket'"
    ).fetchall()
    for turn_id, conversation_key, event_ids, content in rows:
        prefix = "ws:" + conversation_key.removeprefix("websocket:") + ":"
        first = (json.loads(event_ids) or [""])[0]
        if not first.startswith("ws:"):
            continue  # a background result or a resumption: no one's message
        message_id = first.removeprefix(prefix) if first.startswith(prefix) else f"c_{turn_id[:12]}"
        shown = json.dumps([{"message_id": message_id, "text": content}])
        db.execute("UPDATE turns SET inbound_messages = ? WHERE id = ?", [shown, turn_id])


def _v8_quota_counters(db: Database) -> None:
    # Quota windows (bot/pipeline/quota.py): one row per scope, window and window start; expired rows
    # (expires_at, unix seconds) are pruned now and then.
    db.table("quota_counters").create(
        {"bucket": str, "turns": int, "tokens": int, "expires_at": float},
        pk="bucket",
        not_null={"turns", "tokens", "expires_at"},
    )
    db.table("quota_counters").create_index(["expires_at"])
    db.table("usage").create_index(["created_at"])  # `bot usage --since`, the admin's usage


class _Written:
    """A migration written once (`bot.storage.ddl.STEPS`), compiled for SQLite."""

    def __init__(self, version: int, step: tuple[ExecutableDDLElement, ...]) -> None:
        self.__name__ = f"_v{version}"
        self.statements = ddl.statements("sqlite", step)

    def __call__(self, db: Database) -> None:
        for statement in self.statements:
            db.execute(statement)


MIGRATIONS: tuple[Callable[[Database], None], ...] = (
    _v1_core_tables,
    _v2_titles_and_audit_extra,
    _v3_memory_scope_and_orders,
    _v4_event_claims,
    _v5_resume_attempts,
    _v6_api_sessions,
    _v7_turn_inbound_messages,
    _v8_quota_counters,
    *(_Written(version, step) for version, step in enumerate(ddl.STEPS, start=ddl.FIRST)),
)


def migrate(db: Database, *, target: int | None = None) -> list[int]:
    """Apply the migrations missing up to version `target` (default: all); returns those applied."""
    db.table("schema_migrations").create(
        {"version": int, "applied_at": str}, pk="version", if_not_exists=True
    )
    have = {row[0] for row in db.execute("SELECT version FROM schema_migrations")}
    if have and max(have) > len(MIGRATIONS):
        raise RuntimeError(
            f"database schema v{max(have)} is newer than this code (v{len(MIGRATIONS)}); "
            "upgrade the bot or point storage.path at another file"
        )
    applied: list[int] = []
    for version, step in enumerate(MIGRATIONS[:target], start=1):
        if version in have:
            continue
        db.execute("BEGIN IMMEDIATE")  # look again under the lock: another process may migrate
        try:
            done = db.execute("SELECT 1 FROM schema_migrations WHERE version = ?", [version])
            if done.fetchone() is None:
                step(db)
                db.execute("INSERT INTO schema_migrations VALUES (?, ?)", [version, now()])
                applied.append(version)
            db.execute("COMMIT")
        except BaseException:
            db.rollback()
            raise
    return applied
