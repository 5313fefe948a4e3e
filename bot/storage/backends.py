"""Which store the config names: SQLite at `storage.path`, or PostgreSQL at `storage.url`."""

from __future__ import annotations

from pathlib import Path

from bot.storage.pg import PostgresStore
from bot.storage.store import SqliteStore

AnyStore = SqliteStore | PostgresStore


def build_store(path: str | Path, url: str | None) -> AnyStore:
    """`url` wins when set; `path` is the SQLite file (":memory:" for none)."""
    return PostgresStore(url) if url else SqliteStore(path)
