"""SqliteStore: the store's tables (each written once, beside it) on the SQLite connection."""

from __future__ import annotations

from pathlib import Path

from bot.storage.api_records import ApiRecords
from bot.storage.blob_records import BlobTable
from bot.storage.claims import EventClaims
from bot.storage.connection import StoreConnection
from bot.storage.conversation_states import ConversationStateTable
from bot.storage.messages import MessageLog
from bot.storage.quotas import QuotaCounters
from bot.storage.records import UserRecords
from bot.storage.sessions import SessionLog
from bot.storage.turns import TurnLog
from bot.storage.views import AdminViews


class SqliteStore(
    MessageLog,
    SessionLog,
    TurnLog,
    EventClaims,
    QuotaCounters,
    UserRecords,
    AdminViews,
    ApiRecords,
    BlobTable,
    ConversationStateTable,
    StoreConnection,
):
    """The whole `bot.storage.base.Store` on one SQLite connection.

    Every public method is a coroutine (so a store on another backend can really await) that
    runs one short transaction on the loop; WAL checkpoints run on their own thread (see
    `bot.storage.connection` for why, with the measurements).
    """

    def __init__(self, path: str | Path, *, history_cache_size: int = 256) -> None:
        super().__init__(path)
        self._init_history(history_cache_size)
