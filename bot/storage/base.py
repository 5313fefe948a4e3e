"""`Store`: everything the gateway needs from storage, as one protocol made of roles.

The roles (bot/storage/roles.py) are the agent runtime's message log (`MessageRecords`, as
`agent.store.Store`: sessions, messages, audit, usage), the tools' user records
(`tools.memory`: memories, orders), the sessions API's records
(`adapters.api.records.SessionRecords`), and what `bot` itself uses: event claims, the turn
log, quotas, admin views, blobs and conversation states. Each consumer is handed only its
roles (constructor parameters typed with them, wired in bot/runtime/), never the whole store.
`SqliteStore` is the embedded implementation, `PostgresStore` (bot/storage/pg/) the networked
one; both pass the same contract test (tests/test_store_contract.py).
"""

from __future__ import annotations

from typing import Protocol

from adapters.api.records import SessionRecords as ApiRecords
from bot.storage.roles import (
    AdminViewRecords,
    ApprovalRecords,
    BlobRecords,
    ClaimRecords,
    ConversationStateRecords,
    HandoffRecords,
    MessageRecords,
    PairingRecords,
    QuotaRecords,
    ScheduleRecords,
    TurnRecords,
)
from tools.memory import MemoryStore, OrderStore


class StorageError(Exception):
    """The storage failed (a full disk, a lock held too long, an unreadable file): the call did
    nothing. A store raises it for faults of the storage, not for bad arguments."""


class Store(
    MessageRecords,
    ClaimRecords,
    TurnRecords,
    MemoryStore,
    OrderStore,
    QuotaRecords,
    AdminViewRecords,
    ApiRecords,
    BlobRecords,
    ConversationStateRecords,
    PairingRecords,
    ApprovalRecords,
    ScheduleRecords,
    HandoffRecords,
    Protocol,
):
    """The whole store an app runs on."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    def write_alone(self) -> None:
        """This process is the only writer of what it writes (`bot serve` without Redis): what
        it caches of its sessions is all there is, not read again for others' changes."""
        ...

    @property
    def trouble(self) -> str | None:
        """The newest storage failure not yet followed by a success of that kind (for /readyz)."""
        ...
