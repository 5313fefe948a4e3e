"""What tools keep per user: memories and orders, always scoped by tenant and user."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from bot.storage.connection import StoreConnection
from bot.storage.schema import insert_sql, now

_ORDER_COLUMNS = [
    "id",
    "tenant",
    "user_id",
    "session_id",
    "service",
    "category",
    "method",
    "amount",
    "currency",
    "status",
    "payment_url",
    "created_at",
    "expires_at",
]
_INSERT_ORDER = insert_sql("orders", " ".join(_ORDER_COLUMNS))


class UserRecords(StoreConnection):
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
        return await self._run(self._save_memory_db, row)

    async def list_memories(
        self, *, tenant: str, user_id: str, limit: int = 200
    ) -> list[dict[str, Any]]:
        sql = (
            "SELECT * FROM memories WHERE tenant = ? AND user_id = ?"
            " ORDER BY importance DESC, updated_at DESC LIMIT ?"
        )
        return await self._run(self._select, sql, tenant, user_id, limit)

    async def create_order(self, order: Mapping[str, Any]) -> None:
        await self._run(self._create_order_db, dict(order))

    async def get_order(self, order_id: str) -> dict[str, Any] | None:
        return await self._one("SELECT * FROM orders WHERE id = ?", order_id)

    # -- the SQL, one short transaction each --------------------------------------------
    def _save_memory_db(self, row: tuple[Any, ...]) -> int:
        tenant, user_id, memory_type, content, category, importance, key = row
        stamp = now()
        with self._transaction() as conn:
            found = conn.execute(
                "SELECT id FROM memories WHERE tenant = ? AND user_id = ? AND "
                + ("key = ?" if key else "key IS NULL AND content = ? COLLATE NOCASE"),
                (tenant, user_id, key or content),
            ).fetchone()
            if found is not None:
                conn.execute(
                    "UPDATE memories SET memory_type = ?, content = ?, category = ?,"
                    " importance = ?, updated_at = ? WHERE id = ?",
                    (memory_type, content, category, importance, stamp, found[0]),
                )
                return cast(int, found[0])
            cursor = conn.execute(
                "INSERT INTO memories (tenant, user_id, memory_type, content, category,"
                " importance, key, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*row, stamp, stamp),
            )
            return cast(int, cursor.lastrowid)

    def _create_order_db(self, order: dict[str, Any]) -> None:
        unknown = set(order) - set(_ORDER_COLUMNS)
        if unknown:
            raise ValueError(f"unknown order fields {sorted(unknown)}; known: {_ORDER_COLUMNS}")
        order.setdefault("created_at", now())
        self._conn.execute(_INSERT_ORDER, tuple(order.get(c) for c in _ORDER_COLUMNS))
