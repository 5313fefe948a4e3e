"""SqliteStore: sessions, messages, audit, turns and usage in SQLite (WAL), short calls on the loop."""

from bot.storage.base import StorageError
from bot.storage.history_cache import HistoryItem
from bot.storage.messages import AUDIT_RESULT_LIMIT
from bot.storage.schema import MIGRATIONS, SESSION_STATUSES, TURN_STATUSES, migrate
from bot.storage.store import SqliteStore

__all__ = [
    "AUDIT_RESULT_LIMIT",
    "MIGRATIONS",
    "SESSION_STATUSES",
    "TURN_STATUSES",
    "HistoryItem",
    "SqliteStore",
    "StorageError",
    "migrate",
]
