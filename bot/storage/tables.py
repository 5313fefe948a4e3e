"""The store's tables, described once (SQLAlchemy Core) for SQLite and PostgreSQL alike.

This is the schema as the migrations leave it (tests/test_store_schema.py compares a migrated
database of each kind with it); queries (`bot.storage.query`) and new migrations are written
against it. Types are the few both backends share: text (timestamps are ISO-8601 text, JSON is
text), integer, float (unix seconds), bytes. PostgreSQL's `seq` identity columns, its stand-in
for SQLite's rowid (the creation order), are not listed: `creation_order` names either.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ColumnElement

metadata = sa.MetaData()
Text, Int, Float = sa.Text, sa.Integer, sa.Float


def _col(name: str, kind: Any, *, null: bool = True, **kw: Any) -> sa.Column[Any]:
    return sa.Column(name, kind, nullable=null and not kw.get("primary_key"), **kw)


# fmt: off
chat_sessions = sa.Table(
    "chat_sessions", metadata,
    _col("id", Text, primary_key=True), _col("agent_id", Text, null=False),
    _col("parent_session_id", Text), _col("channel", Text, null=False),
    _col("conversation_key", Text, null=False), _col("user_id", Text, null=False),
    _col("status", Text, null=False), _col("persona_version", Text), _col("created_at", Text),
    _col("updated_at", Text), _col("title", Text),
)
messages = sa.Table(
    "messages", metadata,
    _col("id", Int, primary_key=True),
    _col("session_id", Text, null=False), _col("turn_id", Text, null=False),
    _col("role", Text, null=False), _col("content", Text, null=False), _col("tool_calls", Text),
    _col("tool_call_id", Text), _col("name", Text), _col("is_error", Int, null=False),
    _col("tokens_in", Int), _col("tokens_out", Int), _col("created_at", Text),
    _col("parts", Text),  # content parts beside `content`, as JSON (content.parts); v9
)
audit_logs = sa.Table(
    "audit_logs", metadata,
    _col("id", Int, primary_key=True), _col("session_id", Text, null=False),
    _col("turn_id", Text), _col("call_id", Text, null=False), _col("tool_name", Text, null=False),
    _col("arguments", Text), _col("result", Text), _col("ok", Int, null=False),
    _col("duration_ms", Float), _col("created_at", Text), _col("extra", Text),
)
turns = sa.Table(
    "turns", metadata,
    _col("id", Text, primary_key=True), _col("session_id", Text, null=False),
    _col("channel", Text), _col("conversation_key", Text),
    _col("inbound_event_ids", Text, null=False), _col("placeholder", Text),
    _col("status", Text, null=False), _col("final_text", Text), _col("error", Text),
    _col("created_at", Text), _col("finished_at", Text),
    _col("resume_attempts", Int, null=False, server_default="0"), _col("inbound_messages", Text),
    _col("final_parts", Text),  # the final answer's media, as JSON (content.parts); v11
)
memories = sa.Table(
    "memories", metadata,
    _col("id", Int, primary_key=True), _col("user_id", Text, null=False),
    _col("memory_type", Text), _col("content", Text, null=False), _col("category", Text),
    _col("importance", Int), _col("created_at", Text), _col("updated_at", Text),
    _col("tenant", Text, null=False, server_default=""), _col("key", Text),
)
usage = sa.Table(
    "usage", metadata,
    _col("id", Int, primary_key=True), _col("session_id", Text, null=False),
    _col("turn_id", Text), _col("provider", Text), _col("model", Text),
    _col("input_tokens", Int), _col("output_tokens", Int), _col("created_at", Text),
)
orders = sa.Table(
    "orders", metadata,
    _col("id", Text, primary_key=True), _col("tenant", Text, null=False),
    _col("user_id", Text, null=False), _col("session_id", Text), _col("service", Text, null=False),
    _col("category", Text), _col("method", Text), _col("amount", Float, null=False),
    _col("currency", Text, null=False), _col("status", Text, null=False),
    _col("payment_url", Text), _col("created_at", Text), _col("expires_at", Text),
)
event_claims = sa.Table(  # expires_at: unix seconds
    "event_claims", metadata,
    _col("event_id", Text, primary_key=True), _col("expires_at", Float, null=False),
)
api_sessions = sa.Table(
    "api_sessions", metadata,
    _col("id", Text, primary_key=True), _col("key_id", Text, null=False), _col("user_id", Text),
    _col("created_at", Text, null=False),
)
api_messages = sa.Table(
    "api_messages", metadata,
    _col("position", Int, primary_key=True), _col("session_id", Text, null=False),
    _col("message_id", Text, null=False), _col("role", Text, null=False),
    _col("text", Text, null=False), _col("status", Text, null=False), _col("reply_to", Text),
    _col("display", Text), _col("action", Text), _col("seq", Int, null=False),
    _col("created_at", Text, null=False),
    _col("parts", Text),  # the message's media, as JSON (content.parts); v11
)
quota_counters = sa.Table(  # expires_at: unix seconds
    "quota_counters", metadata,
    _col("bucket", Text, primary_key=True), _col("turns", Int, null=False),
    _col("tokens", Int, null=False), _col("expires_at", Float, null=False),
)
# v10: the bytes of non-text parts (content.blobs), by content address (sha256 hex)
blobs = sa.Table(
    "blobs", metadata,
    _col("blob_id", Text, primary_key=True), _col("mime_type", Text, null=False),
    _col("size", Int, null=False), _col("created_at", Float, null=False),  # unix seconds
    _col("data", sa.LargeBinary, null=False),
    sa.Index("idx_blobs_created_at", "created_at"),
)
# v10: a conversation's mode, assignee and settings; `version` for compare-and-set
conversation_states = sa.Table(
    "conversation_states", metadata,
    _col("conversation_key", Text, primary_key=True), _col("mode", Text, null=False),
    _col("assignee", Text), _col("settings", Text, null=False),  # a JSON object
    _col("version", Int, null=False), _col("updated_at", Float, null=False),  # unix seconds
)
# v12: pairing codes of unknown senders and the senders approved (bot/storage/pairings.py);
# one row per sender of a channel instance; times are unix seconds, `chat` a JSON chat record
pairings = sa.Table(
    "pairings", metadata,
    _col("channel", Text, primary_key=True), _col("user_id", Text, primary_key=True),
    _col("code", Text, null=False), _col("status", Text, null=False),
    _col("chat", Text, null=False), _col("user_name", Text), _col("language", Text),
    _col("created_at", Float, null=False), _col("expires_at", Float, null=False),
    _col("sent_at", Float, null=False), _col("attempts", Int, null=False),
    _col("decided_at", Float), _col("decided_by", Text), _col("notified_at", Float),
    sa.Index("idx_pairings_code", "code"),
    sa.Index("idx_pairings_untold", "status", "notified_at"),  # approvals to tell, every 2 s
)
# v13: approvals before sensitive tools (bot/approvals/): one row per call asked about, used
# once; and the "always allow" grants of a conversation, per tool and target
approvals = sa.Table(
    "approvals", metadata,
    _col("id", Text, primary_key=True), _col("turn_id", Text, null=False),
    _col("session_id", Text, null=False), _col("call_id", Text, null=False),
    _col("tool_name", Text, null=False), _col("arguments", Text, null=False),  # JSON object
    _col("target", Text, null=False), _col("conversation_key", Text, null=False),
    _col("channel", Text, null=False), _col("user_id", Text, null=False),
    _col("status", Text, null=False), _col("decision", Text), _col("decided_by", Text),
    _col("created_at", Float, null=False), _col("expires_at", Float, null=False),
    _col("decided_at", Float), _col("notice", Text),  # JSON: the operator place's message
    sa.Index("idx_approvals_call", "turn_id", "call_id", unique=True),
    sa.Index("idx_approvals_pending", "status", "expires_at"),
    sa.Index("idx_approvals_conversation", "conversation_key", "status"),
)
approval_grants = sa.Table(
    "approval_grants", metadata,
    _col("conversation_key", Text, primary_key=True), _col("tool_name", Text, primary_key=True),
    _col("target", Text, primary_key=True), _col("granted_by", Text, null=False),
    _col("granted_at", Float, null=False),
)
# v14: schedules (bot/schedules/): a message or a task to send later, once or again and again.
# `next_at` is the due time (unix s; null once finished); `occurrence` counts the fired ones;
# `fence` moves on with every claim, and only the holder of the newest fence may record what
# its claim did (`sending`: the occurrence in flight, `lease_until`: its claim's end)
schedules = sa.Table(
    "schedules", metadata,
    _col("id", Text, primary_key=True), _col("conversation_key", Text, null=False),
    _col("chat", Text, null=False),  # a JSON chat record (bot/storage/turns.py chat_record)
    _col("user_id", Text, null=False), _col("kind", Text, null=False),  # text | task
    _col("body", Text, null=False), _col("spec", Text, null=False),  # the `when`, normalized
    _col("timezone", Text, null=False), _col("missed", Text, null=False),  # late | skip
    _col("status", Text, null=False),  # active | done | cancelled | disabled
    _col("next_at", Float), _col("occurrence", Int, null=False),
    _col("fence", Int, null=False), _col("lease_until", Float), _col("sending", Text),
    _col("failures", Int, null=False), _col("note", Text), _col("language", Text),
    _col("created_at", Float, null=False), _col("fired_at", Float),
    sa.Index("idx_schedules_due", "status", "next_at"),
    sa.Index("idx_schedules_conversation", "conversation_key"),
    sa.Index("idx_schedules_user", "user_id"),
)
# v15: handoff to a person: one row per request (bot/handoff/), and its audited actions
handoffs = sa.Table(
    "handoffs", metadata,
    _col("id", Text, primary_key=True), _col("conversation_key", Text, null=False),
    _col("channel", Text, null=False), _col("chat", Text, null=False),  # a chat record (JSON)
    _col("user_id", Text, null=False), _col("user_name", Text), _col("language", Text),
    _col("reason", Text, null=False), _col("summary", Text, null=False),
    _col("status", Text, null=False), _col("operator", Text), _col("operator_name", Text),
    _col("requested_at", Float, null=False), _col("taken_at", Float),  # unix seconds
    _col("ended_at", Float), _col("thread", Text),  # the operator place's thread id
    sa.Index("idx_handoffs_status", "status", "requested_at"),
    sa.Index("idx_handoffs_thread", "thread"),
    sa.Index("idx_handoffs_conversation", "conversation_key"),
)
handoff_events = sa.Table(
    "handoff_events", metadata,
    _col("id", Int, primary_key=True), _col("handoff_id", Text, null=False),
    _col("at", Float, null=False), _col("actor", Text, null=False),
    _col("action", Text, null=False), _col("detail", Text, null=False),
    sa.Index("idx_handoff_events_handoff", "handoff_id"),
)
# fmt: on


class CreationOrder(ColumnElement[int]):
    """A table's creation order: SQLite's rowid, PostgreSQL's `seq` identity column."""

    inherit_cache = True

    def __init__(self, table: sa.Table) -> None:
        self.table = table


@compiles(CreationOrder, "sqlite")
def _rowid(element: CreationOrder, compiler: SQLCompiler, **kw: Any) -> str:
    return f"{element.table.name}.rowid"


@compiles(CreationOrder, "postgresql")
def _seq(element: CreationOrder, compiler: SQLCompiler, **kw: Any) -> str:
    return f"{element.table.name}.seq"


def creation_order(table: sa.Table) -> CreationOrder:
    return CreationOrder(table)


class DatabaseNow(ColumnElement[float]):
    """Now in unix seconds on the database's clock: one clock for every host sharing it."""

    inherit_cache = True
    type = sa.Float()


@compiles(DatabaseNow, "sqlite")
def _sqlite_now(element: DatabaseNow, compiler: SQLCompiler, **kw: Any) -> str:
    return "((julianday('now') - 2440587.5) * 86400.0)"


@compiles(DatabaseNow, "postgresql")
def _pg_now(element: DatabaseNow, compiler: SQLCompiler, **kw: Any) -> str:
    return "extract(epoch FROM clock_timestamp())"


def database_now() -> DatabaseNow:
    return DatabaseNow()
