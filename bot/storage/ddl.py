"""Migrations written once (v9 on): DDL over `bot.storage.tables`, compiled for each backend.

Versions 1-8 stay as each backend first wrote them (bot/storage/schema.py, pg/schema.py). From
v9 a step is a tuple of DDL elements that each backend appends to its migrations, compiled for
its dialect. A step names the columns it creates, so it means the same forever: adding a column
later is the column in `tables` plus a step `add_column(table.c.name)`, and the schema test
(tests/test_store_schema.py) fails on a database that does not match `tables`.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.schema import CreateIndex, CreateTable, ExecutableDDLElement
from sqlalchemy.sql.compiler import DDLCompiler

from bot.storage import tables
from bot.storage.query import Dialect, dialect_of


class AddColumn(ExecutableDDLElement):
    def __init__(self, column: sa.Column[Any]) -> None:
        self.column = column


@compiles(AddColumn)
def _add_column(element: AddColumn, compiler: DDLCompiler, **kw: Any) -> str:
    column = element.column
    spec = compiler.get_column_specification(column)
    return f"ALTER TABLE {column.table.name} ADD COLUMN {spec}"


def add_column(column: sa.Column[Any]) -> tuple[ExecutableDDLElement, ...]:
    return (AddColumn(column),)


def create_table(table: sa.Table, columns: str) -> tuple[ExecutableDDLElement, ...]:
    """The table with these columns (and the indexes on them), as it stands in `tables` now."""
    names = columns.split()
    frozen = sa.Table(table.name, sa.MetaData(), *(_same(table.c[n]) for n in names))
    indexes = [
        sa.Index(index.name, *(frozen.c[c.name] for c in index.columns), unique=index.unique)
        for index in table.indexes
        if all(c.name in names for c in index.columns)
    ]
    return (CreateTable(frozen), *map(CreateIndex, indexes))


def _same(column: sa.Column[Any]) -> sa.Column[Any]:
    default = column.server_default
    return sa.Column(
        column.name,
        column.type,
        primary_key=column.primary_key,
        nullable=column.nullable,
        server_default=default.arg if isinstance(default, sa.DefaultClause) else None,  # type: ignore[arg-type]
    )


# append new steps, never edit old ones; the first is v9
STEPS: tuple[tuple[ExecutableDDLElement, ...], ...] = (
    add_column(tables.messages.c.parts),
    (
        *create_table(tables.blobs, "blob_id mime_type size created_at data"),
        *create_table(
            tables.conversation_states,
            "conversation_key mode assignee settings version updated_at",
        ),
    ),
    # the answer's media beside its text: a reload and the sessions API's history show them
    (*add_column(tables.turns.c.final_parts), *add_column(tables.api_messages.c.parts)),
    # pairing codes for unknown senders (access dm_policy: pairing), bot/storage/pairings.py
    create_table(
        tables.pairings,
        "channel user_id code status chat user_name language created_at expires_at sent_at"
        " attempts decided_at decided_by notified_at",
    ),
    # approvals before sensitive tools (issue 26): the requests, and the "always allow" grants
    (
        *create_table(
            tables.approvals,
            "id turn_id session_id call_id tool_name arguments target conversation_key channel"
            " user_id status decision decided_by created_at expires_at decided_at notice",
        ),
        *create_table(
            tables.approval_grants, "conversation_key tool_name target granted_by granted_at"
        ),
    ),
    # scheduled messages (issue 27, bot/schedules/; v14): one table, its due index
    create_table(
        tables.schedules,
        "id conversation_key chat user_id kind body spec timezone missed status next_at"
        " occurrence fence lease_until sending failures note language created_at fired_at",
    ),
    # handoff to a person (issue 26; v15): the requests, and every operator action on them
    (
        *create_table(
            tables.handoffs,
            "id conversation_key channel chat user_id user_name language reason summary status"
            " operator operator_name requested_at taken_at ended_at thread",
        ),
        *create_table(tables.handoff_events, "id handoff_id at actor action detail"),
    ),
)
FIRST = 9


def statements(dialect: Dialect, step: tuple[ExecutableDDLElement, ...]) -> tuple[str, ...]:
    return tuple(str(element.compile(dialect=dialect_of(dialect))).strip() for element in step)
