"""What tools keep per user: memories and orders, always scoped by tenant and user."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from bot.storage.query import Query, params
from bot.storage.rows import MemoryRow, OrderRow
from bot.storage.schema import now
from bot.storage.tables import memories as M
from bot.storage.tables import orders as O
from bot.storage.tx import RowQuery, StoreCalls, Tx, fetch_rows

_ORDER_COLUMNS = [c.name for c in O.columns]
_INSERT_ORDER = Query(sa.insert(O).values(params(*_ORDER_COLUMNS)))
_GET_ORDER = RowQuery(sa.select(O).where(O.c.id == sa.bindparam("order_id")), OrderRow)
_USERS = (M.c.tenant == sa.bindparam("tenant"), M.c.user_id == sa.bindparam("user_id"))
_LIST_MEMORIES = RowQuery(
    sa.select(M)
    .where(*_USERS)
    .order_by(M.c.importance.desc(), M.c.updated_at.desc())
    .limit(sa.bindparam("limit")),
    MemoryRow,
)
_FIND_BY_KEY = Query(sa.select(M.c.id).where(*_USERS, M.c.key == sa.bindparam("key")))
_FIND_BY_CONTENT = Query(  # case-insensitive, as SQLite's NOCASE: ASCII letters
    sa.select(M.c.id).where(
        *_USERS,
        M.c.key.is_(None),
        sa.func.lower(M.c.content) == sa.func.lower(sa.cast(sa.bindparam("content"), sa.Text)),
    )
)
_CHANGES = ("memory_type", "content", "category", "importance", "updated_at")
_UPDATE_MEMORY = Query(
    sa.update(M).values(params(*_CHANGES)).where(M.c.id == sa.bindparam("memory_id"))
)
_INSERT_MEMORY = Query(
    sa.insert(M)
    .values(params("tenant", "user_id", "key", "created_at", *_CHANGES))
    .returning(M.c.id)
)


class UserRecords(StoreCalls):
    """Save and list a user's memories; create and read orders."""

    async def save_memory(
        self,
        *,
        tenant: str,
        user_id: str,
        memory_type: str,
        content: str,
        category: str | None,
        importance: int,
        key: str | None = None,
    ) -> int:
        """A memory with the same key (or, without one, the same content) is replaced."""
        row = {"memory_type": memory_type, "content": content, "category": category}
        return await self._tx(_save_memory, tenant, user_id, key, {**row, "importance": importance})

    async def list_memories(
        self, *, tenant: str, user_id: str, limit: int = 200
    ) -> list[MemoryRow]:
        return await self._tx(
            fetch_rows, _LIST_MEMORIES, tenant=tenant, user_id=user_id, limit=limit
        )

    async def create_order(self, order: Mapping[str, Any]) -> None:
        unknown = set(order) - set(_ORDER_COLUMNS)
        if unknown:
            raise ValueError(f"unknown order fields {sorted(unknown)}; known: {_ORDER_COLUMNS}")
        row = {column: order.get(column) for column in _ORDER_COLUMNS}
        if "created_at" not in order:
            row["created_at"] = now()
        await self._tx(_create_order, row)

    async def get_order(self, order_id: str) -> OrderRow | None:
        rows = await self._tx(fetch_rows, _GET_ORDER, order_id=order_id)
        return rows[0] if rows else None


async def _save_memory(
    tx: Tx, /, tenant: str, user_id: str, key: str | None, changes: dict[str, Any]
) -> int:
    user = {"tenant": tenant, "user_id": user_id}
    stamp = now()
    async with tx.transaction():
        await tx.lock(tenant, user_id)  # one user's memories: find-then-write, one at a time
        if key:
            found = await tx.fetchone(_FIND_BY_KEY, key=key, **user)
        else:
            found = await tx.fetchone(_FIND_BY_CONTENT, content=changes["content"], **user)
        if found is not None:
            await tx.execute(_UPDATE_MEMORY, memory_id=found[0], updated_at=stamp, **changes)
            return int(found[0])
        row = await tx.fetchone(
            _INSERT_MEMORY, key=key, created_at=stamp, updated_at=stamp, **user, **changes
        )
    assert row is not None  # RETURNING gives the new row
    return int(row[0])


async def _create_order(tx: Tx, /, row: dict[str, Any]) -> None:
    await tx.execute(_INSERT_ORDER, **row)
