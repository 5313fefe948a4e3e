"""Conversation states (the `conversation_states` table), saved by compare-and-set."""

from __future__ import annotations

import json

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert

from bot.storage.query import Query, params
from bot.storage.rows import ConversationStateRow
from bot.storage.tables import conversation_states as states
from bot.storage.tx import Row, StoreCalls, Tx

_COLUMNS = ["mode", "assignee", "settings", "version", "updated_at"]
_LOAD = Query(
    sa.select(states).where(states.c.conversation_key == sa.bindparam("conversation_key"))
)
_CREATE = Query(
    insert(states)
    .values(params("conversation_key", *_COLUMNS))
    .on_conflict_do_nothing(index_elements=[states.c.conversation_key])
)
_MOVE_ON = Query(
    sa.update(states)
    .values(params(*_COLUMNS))
    .where(
        states.c.conversation_key == sa.bindparam("key"),
        states.c.version == sa.bindparam("expected_version"),
    )
)


class ConversationStateTable(StoreCalls):
    """`ConversationStateRecords` (bot/storage/base.py): one statement a call."""

    async def load_conversation_state(self, key: str) -> ConversationStateRow | None:
        return await self._tx(_load, key)

    async def save_conversation_state(
        self, row: ConversationStateRow, *, expected_version: int
    ) -> bool:
        """Writes `row` if the stored version is still `expected_version` (0: there is no row
        yet); False, writing nothing, when another writer moved it on since it was read."""
        if row.version != expected_version + 1:
            raise ValueError(
                f"a saved conversation state moves its version on by one: expected version"
                f" {expected_version} saves version {expected_version + 1}, not {row.version}"
            )
        return await self._tx(_save, row, expected_version)


async def _load(tx: Tx, /, key: str) -> ConversationStateRow | None:
    row = await tx.fetchone(_LOAD, conversation_key=key)
    return None if row is None else _state(row)


async def _save(tx: Tx, /, row: ConversationStateRow, expected_version: int) -> bool:
    values = {
        "mode": row.mode,
        "assignee": row.assignee,
        "settings": json.dumps(dict(row.settings), ensure_ascii=False, sort_keys=True),
        "version": row.version,
        "updated_at": row.updated_at,
    }
    if expected_version == 0:
        return await tx.execute(_CREATE, conversation_key=row.conversation_key, **values) == 1
    moved = await tx.execute(
        _MOVE_ON, key=row.conversation_key, expected_version=expected_version, **values
    )
    return moved == 1


def _state(row: Row) -> ConversationStateRow:
    key, mode, assignee, settings, version, updated_at = row
    return ConversationStateRow(key, mode, assignee, json.loads(settings), version, updated_at)
