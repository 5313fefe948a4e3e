"""SqliteStore: the store's tables (each written once, beside it) on the SQLite connection."""

from __future__ import annotations

from pathlib import Path

from bot.storage.calls import AllTables
from bot.storage.connection import StoreConnection
from bot.storage.history_cache import HOT_MESSAGES, MAX_BYTES


class SqliteStore(AllTables, StoreConnection):
    """The whole `bot.storage.base.Store` on one SQLite connection.

    Every public method is a coroutine (so a store on another backend can really await) that
    runs one short transaction on the loop; WAL checkpoints run on their own thread (see
    `bot.storage.connection` for why, with the measurements).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        history_cache_bytes: int = MAX_BYTES,
        history_hot_messages: int = HOT_MESSAGES,
    ) -> None:
        super().__init__(path)
        self._init_history(history_cache_bytes, history_hot_messages)
        self._init_sessions()
