"""Which store the config names: SQLite at `storage.path`, or PostgreSQL at `storage.url`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from bot.storage.store import SqliteStore

if TYPE_CHECKING:
    from bot.storage.pg import PostgresStore

AnyStore: TypeAlias = "SqliteStore | PostgresStore"


def build_store(path: str | Path, url: str | None, **cache: int) -> AnyStore:
    """`url` wins when set; `path` is the SQLite file (":memory:" for none). `cache`: the
    history cache's bounds (`history_cache_bytes`, `history_hot_messages`), else defaults."""
    if url:
        from bot.storage.pg import PostgresStore  # asyncpg is imported only by those who use it

        return PostgresStore(url, **cache)
    return SqliteStore(path, **cache)
