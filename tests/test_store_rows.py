"""The store's rows are small frozen records whose fields are their tables' columns."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import sqlalchemy as sa

from bot.storage import rows, tables
from bot.storage.rows import (
    AuditRow,
    ConversationStateRow,
    MemoryRow,
    MessageRow,
    ModelCallRow,
    OrderRow,
    SessionRow,
    TurnRow,
)
from bot.storage.tx import RowQuery

# a table's record: what a read of its whole rows returns
TABLE_RECORDS: list[tuple[type[object], sa.Table]] = [
    (SessionRow, tables.chat_sessions),
    (MessageRow, tables.messages),
    (AuditRow, tables.audit_logs),
    (TurnRow, tables.turns),
    (ModelCallRow, tables.usage),
    (MemoryRow, tables.memories),
    (OrderRow, tables.orders),
    (ConversationStateRow, tables.conversation_states),
]
RECORDS = [
    member
    for _, member in inspect.getmembers(rows, inspect.isclass)
    if dataclasses.is_dataclass(member) and member.__module__ == rows.__name__
]


@pytest.mark.parametrize(
    ("record", "table"), TABLE_RECORDS, ids=[table.name for _, table in TABLE_RECORDS]
)
def test_a_tables_record_has_its_columns_as_fields_in_order(
    record: type[object], table: sa.Table
) -> None:
    assert dataclasses.is_dataclass(record)
    fields = [field.name for field in dataclasses.fields(record)]
    assert fields == [column.name for column in table.columns]


@pytest.mark.parametrize("record", RECORDS, ids=[record.__name__ for record in RECORDS])
def test_every_record_is_frozen_and_slotted(record: type[object]) -> None:
    assert dataclasses.is_dataclass(record)
    assert record.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert "__slots__" in vars(record)


def test_a_query_whose_columns_are_not_its_records_fields_is_refused_when_made() -> None:
    with pytest.raises(
        TypeError, match=r"SessionRow has the fields .* the columns .*'memory_type'"
    ):
        RowQuery(sa.select(tables.memories), SessionRow)
    with pytest.raises(TypeError, match="SessionRow"):  # the same columns in another order
        RowQuery(sa.select(*reversed(tables.chat_sessions.columns)), SessionRow)
    assert RowQuery(sa.select(tables.chat_sessions), SessionRow).record is SessionRow
