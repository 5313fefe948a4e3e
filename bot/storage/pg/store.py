"""PostgresStore: the store's tables (each written once, in bot/storage/) on a PostgreSQL pool."""

from __future__ import annotations

from typing import Any

from bot.storage.calls import AllTables
from bot.storage.history_cache import HOT_MESSAGES, MAX_BYTES
from bot.storage.pg.connection import PgConnection


class PostgresStore(AllTables, PgConnection):
    """The whole `bot.storage.base.Store` on a PostgreSQL pool: for gateway processes on
    several hosts. Each public method is one statement or one short transaction."""

    def __init__(
        self,
        url: str,
        *,
        history_cache_bytes: int = MAX_BYTES,
        history_hot_messages: int = HOT_MESSAGES,
        **pool: Any,
    ) -> None:
        super().__init__(url, **pool)
        self._init_history(history_cache_bytes, history_hot_messages)
        self._init_sessions()
