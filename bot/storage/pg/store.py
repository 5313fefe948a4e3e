"""PostgresStore: the store's tables (each written once, in bot/storage/) on a PostgreSQL pool."""

from __future__ import annotations

from typing import Any

from bot.storage.api_records import ApiRecords
from bot.storage.blob_records import BlobTable
from bot.storage.claims import EventClaims
from bot.storage.conversation_states import ConversationStateTable
from bot.storage.messages import MessageLog
from bot.storage.pg.connection import PgConnection
from bot.storage.quotas import QuotaCounters
from bot.storage.records import UserRecords
from bot.storage.sessions import SessionLog
from bot.storage.turns import TurnLog
from bot.storage.views import AdminViews


class PostgresStore(
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
    PgConnection,
):
    """The whole `bot.storage.base.Store` on a PostgreSQL pool: for gateway processes on
    several hosts. Each public method is one statement or one short transaction."""

    def __init__(self, url: str, *, history_cache_size: int = 256, **pool: Any) -> None:
        super().__init__(url, **pool)
        self._init_history(history_cache_size)
