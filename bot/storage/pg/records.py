"""What tools keep per user on PostgreSQL: memories and orders, always scoped by tenant and user."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from bot.storage.pg.connection import PgConnection
from bot.storage.records import _ORDER_COLUMNS
from bot.storage.schema import now

if TYPE_CHECKING:
    from bot.storage.pg.conn import Conn

_INSERT_ORDER = (
    f"INSERT INTO orders ({', '.join(_ORDER_COLUMNS)})"
    f" VALUES ({', '.join(f'${n}' for n in range(1, len(_ORDER_COLUMNS) + 1))})"
)
# one user's memories are written one call at a time, across processes: find-then-write
_LOCK_USER = "SELECT pg_advisory_xact_lock(hashtextextended($1::text || chr(31) || $2::text, 0))"
_FIND_BY_KEY = "SELECT id FROM memories WHERE tenant = $1 AND user_id = $2 AND key = $3"
_FIND_BY_CONTENT = (  # like SQLite's COLLATE NOCASE
    "SELECT id FROM memories WHERE tenant = $1 AND user_id = $2 AND key IS NULL"
    " AND lower(content) = lower($3)"
)
_UPDATE_MEMORY = (
    "UPDATE memories SET memory_type = $1, content = $2, category = $3, importance = $4,"
    " updated_at = $5 WHERE id = $6"
)
_INSERT_MEMORY = (
    "INSERT INTO memories (tenant, user_id, memory_type, content, category, importance, key,"
    " created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) RETURNING id"
)


class PgUserRecords(PgConnection):
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
        row = (tenant, user_id, memory_type, content, category, importance, key)
        return await self._run(_save_memory, row)

    async def list_memories(
        self, *, tenant: str, user_id: str, limit: int = 200
    ) -> list[dict[str, Any]]:
        sql = (
            "SELECT * FROM memories WHERE tenant = $1 AND user_id = $2"
            " ORDER BY importance DESC, updated_at DESC LIMIT $3"
        )
        return await self._select(sql, tenant, user_id, limit)

    async def create_order(self, order: Mapping[str, Any]) -> None:
        row = dict(order)
        unknown = set(row) - set(_ORDER_COLUMNS)
        if unknown:
            raise ValueError(f"unknown order fields {sorted(unknown)}; known: {_ORDER_COLUMNS}")
        row.setdefault("created_at", now())
        await self._run(_create_order, tuple(row.get(c) for c in _ORDER_COLUMNS))

    async def get_order(self, order_id: str) -> dict[str, Any] | None:
        return await self._one("SELECT * FROM orders WHERE id = $1", order_id)


async def _save_memory(conn: Conn, row: tuple[Any, ...]) -> int:
    tenant, user_id, memory_type, content, category, importance, key = row
    stamp = now()
    async with conn.transaction():
        await conn.execute(_LOCK_USER, tenant, user_id)
        if key:
            found = await conn.fetchval(_FIND_BY_KEY, tenant, user_id, key)
        else:
            found = await conn.fetchval(_FIND_BY_CONTENT, tenant, user_id, content)
        if found is not None:
            fields = (memory_type, content, category, importance, stamp)
            await conn.execute(_UPDATE_MEMORY, *fields, found)
            return int(found)
        return int(await conn.fetchval(_INSERT_MEMORY, *row, stamp))


async def _create_order(conn: Conn, row: tuple[Any, ...]) -> None:
    await conn.execute(_INSERT_ORDER, *row)
