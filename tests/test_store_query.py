"""Queries written once (bot/storage/query.py): compiled once per dialect, values bound by name,
constants left in the text, and an op on SQLite run to its end at once (bot/storage/tx.py)."""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa

from bot.storage.query import Query
from bot.storage.tables import chat_sessions as S
from bot.storage.tables import creation_order
from bot.storage.tables import messages as M
from bot.storage.tx import run_now

NEWEST_ACTIVE = Query(
    sa.select(S.c.id)
    .where(S.c.user_id == sa.bindparam("user_id"), S.c.status == "active")
    .order_by(creation_order(S).desc())
    .limit(1)
)


def test_each_dialect_is_compiled_once_with_its_placeholders_and_creation_order() -> None:
    sqlite, postgresql = NEWEST_ACTIVE.sql("sqlite"), NEWEST_ACTIVE.sql("postgresql")
    assert NEWEST_ACTIVE.sql("sqlite") is sqlite  # kept, not compiled again
    assert "user_id = ?" in sqlite.text and "chat_sessions.rowid DESC" in sqlite.text
    assert "user_id = $1" in postgresql.text and "chat_sessions.seq DESC" in postgresql.text


def test_only_the_callers_values_are_parameters() -> None:
    compiled = NEWEST_ACTIVE.sql("sqlite")
    assert "status = 'active'" in compiled.text and "LIMIT 1" in compiled.text
    assert compiled.bind({"user_id": "u1", "unused": 1}) == ("u1",)
    with pytest.raises(TypeError, match="'user_id'"):
        compiled.bind({})


def test_values_are_a_mapping_keywords_or_both_the_keywords_winning() -> None:
    compiled = NEWEST_ACTIVE.sql("sqlite")
    assert compiled.bind({"user_id": "u1"}) == ("u1",)
    assert compiled.bind(None, {"user_id": "u2"}) == ("u2",)
    assert compiled.bind({"user_id": "u1"}, {"user_id": "u2"}) == ("u2",)


def test_new_ids_are_returned_on_postgresql_only() -> None:
    query = Query(sa.insert(M).values(content=sa.bindparam("content")), new_ids=M.c.id)
    assert "RETURNING messages.id" in query.sql("postgresql").text
    assert "RETURNING" not in query.sql("sqlite").text  # the cursor's lastrowid instead


def test_a_parameter_used_twice_is_given_once() -> None:
    prefix = sa.cast(sa.bindparam("prefix"), sa.Text)
    query = Query(
        sa.select(S.c.id).where(sa.func.substr(S.c.id, 1, sa.func.length(prefix)) == prefix)
    )
    assert query.sql("postgresql").bind({"prefix": "ab"}) == ("ab",)  # $1 twice
    assert query.sql("sqlite").bind({"prefix": "ab"}) == ("ab", "ab")


def test_an_op_that_suspends_is_refused_on_sqlite() -> None:
    async def done() -> int:
        return 7

    async def suspends() -> None:
        await asyncio.sleep(0)

    assert run_now(done()) == 7
    with pytest.raises(RuntimeError, match="suspends"):
        run_now(suspends())
