"""`StoreCalls` of every table, written once: a backend's store is these on its connection."""

from __future__ import annotations

from bot.storage.api_records import ApiRecords
from bot.storage.approvals import ApprovalTable
from bot.storage.blob_records import BlobTable
from bot.storage.claims import EventClaims
from bot.storage.conversation_states import ConversationStateTable
from bot.storage.handoffs import HandoffTable
from bot.storage.messages import MessageLog
from bot.storage.pairings import PairingTable
from bot.storage.quotas import QuotaCounters
from bot.storage.records import UserRecords
from bot.storage.schedules import ScheduleTable
from bot.storage.sessions import SessionLog
from bot.storage.turns import TurnLog
from bot.storage.user_usage import UserUsageViews
from bot.storage.views import AdminViews


class AllTables(
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
    PairingTable,
    ApprovalTable,
    UserUsageViews,
    ScheduleTable,
    HandoffTable,
):
    """The whole `bot.storage.base.Store`, on whichever connection comes after it in the MRO
    (`StoreConnection`: SQLite, `PgConnection`: PostgreSQL), which runs each call."""
