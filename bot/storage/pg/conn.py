"""`Conn`: a pooled connection, or a plain one (migrations in tests); the same methods."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

import asyncpg

if TYPE_CHECKING:  # asyncpg's classes are not subscriptable at run time
    Conn: TypeAlias = (
        asyncpg.Connection[asyncpg.Record] | asyncpg.pool.PoolConnectionProxy[asyncpg.Record]
    )
