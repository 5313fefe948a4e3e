"""The store's roles: the protocols `Store` (bot/storage/base.py) is made of, one a job.

Each consumer is handed the role it uses (a constructor parameter of that type), so what it may
do with the database is visible where it is built, and a fake for its test is small.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Protocol

from adapters.base import ChatRef
from agent.store import Store as AgentStore
from agent.types import Message
from bot.storage.pairings import PairingRequest, PairingTicket
from bot.storage.rows import (
    AuditRow,
    ConversationRow,
    ConversationStateRow,
    MessageRow,
    ModelCallRow,
    PairingRow,
    ResumedTurn,
    SessionRow,
    ToolCallRow,
    TurnRow,
    TurnUsage,
    UsageTotalRow,
)
from content.parts import Part


class MessageRecords(AgentStore, Protocol):
    """The agent runtime's message log (`agent.store.Store`): sessions, their messages, the
    tool-call audit and usage; the gateway reads and closes histories through it too."""


class ClaimRecords(Protocol):
    """Platform event ids claimed once, by anyone sharing the database (the `event_claims`)."""

    async def claim_event(self, event_id: str, ttl_s: float) -> bool:
        """True the first time `event_id` is claimed within `ttl_s`, by anyone sharing the store."""
        ...

    async def release_event(self, event_id: str) -> None: ...


class TurnRecords(Protocol):
    """A conversation's active session and its turns: the gateway's and the resumer's log."""

    async def active_session(
        self,
        *,
        channel: str,
        conversation_key: str,
        user_id: str,
        agent_id: str = "default",
        persona_version: str | None = None,
    ) -> str:
        """The newest active session of this conversation, user and persona, else a new one."""
        ...

    async def close_active_sessions(
        self, *, channel: str, conversation_key: str, user_id: str, agent_id: str = "default"
    ) -> int: ...

    async def create_turn(
        self,
        *,
        turn_id: str,
        session_id: str,
        channel: str,
        conversation_key: str,
        inbound_event_ids: list[str],
        placeholder: dict[str, Any] | None,
        status: str = "running",
        inbound_messages: list[dict[str, str]] | None = None,
        messages: Sequence[Message] = (),
    ) -> None:
        """`inbound_messages`: the user's messages as the channel showed them, each
        `{"message_id", "text"}`, kept for `recent_turns` (the transcript a reload shows).
        `messages`: the turn's first messages for its session's history, written with it."""
        ...

    async def finish_turn(
        self,
        turn_id: str,
        *,
        status: str,
        final_text: str | None = None,
        error: str | None = None,
        final_parts: Sequence[Part] = (),
    ) -> None:
        """`final_parts`: the media the final answer went out with, shown with it on a reload."""
        ...

    async def recent_turns(
        self,
        *,
        channel: str,
        conversation_key: str,
        user_id: str,
        agent_id: str = "default",
        limit: int = 100,
    ) -> list[TurnRow]:
        """The newest `limit` turns of the session `active_session` would return (but none, and
        nothing created, when the conversation has no active session), oldest first."""
        ...

    async def unfinished_turns(self) -> list[TurnRow]: ...

    async def turn_for_events(self, conversation_key: str, event_ids: list[str]) -> TurnRow | None:
        """The conversation's newest turn (finished or not) that took any of these inbound
        events; None if none of its newest turns did."""
        ...

    async def update_turn_placeholder(self, turn_id: str, placeholder: dict[str, Any]) -> None:
        """The placeholder's handle record, once it is posted (the turn was created before)."""
        ...

    async def begin_resume(self, turn_id: str) -> ResumedTurn | None:
        """If the turn is still `running`: add one to its `resume_attempts` and return it, with
        its session's `user_id` and `agent_id`, in one transaction. Else None."""
        ...

    async def turn_tool_calls(self, turn_id: str, session_id: str) -> list[ToolCallRow]:
        """The audit rows of one session's calls in the turn, oldest first."""
        ...

    async def running_worker_sessions(self) -> list[SessionRow]:
        """Sessions with a parent (specialists) whose status is still `running`."""
        ...

    async def conversation_chat(self, conversation_key: str) -> ChatRef | None: ...

    async def latest_conversation(
        self, *, channel: str, key_prefix: str, user_id: str
    ) -> str | None:
        """The key of the conversation, among those whose key starts with `key_prefix`, in which
        this user's session had its newest turn (a user's latest Slack thread in a channel)."""
        ...

    async def turn_usage(self, turn_id: str) -> TurnUsage:
        """The turn's model calls and tokens (specialists included)."""
        ...


class QuotaRecords(Protocol):
    """Quota counters (bot/pipeline/quota.py `StoreQuotaState`)."""

    async def quota_counts(self, buckets: Sequence[str]) -> dict[str, tuple[int, int]]:
        """(turns, tokens) of each unexpired bucket that has any."""
        ...

    async def quota_add(
        self, bucket: str, *, turns: int, tokens: int, expires_at: float
    ) -> None: ...


class AdminViewRecords(Protocol):
    """What the sessions view, `bot sessions`, `bot usage` and the admin read, as records."""

    async def get_session(self, session_id: str) -> SessionRow | None: ...

    async def child_sessions(self, session_id: str) -> list[SessionRow]: ...

    async def audit_for_session(self, session_id: str) -> list[AuditRow]: ...

    async def messages_for_session(self, session_id: str) -> list[MessageRow]: ...

    async def turns_for_session(self, session_id: str) -> list[TurnRow]: ...

    async def conversations(
        self, *, channel: str | None = None, user_id: str | None = None, limit: int = 50
    ) -> list[ConversationRow]: ...

    async def recent_sessions(
        self, *, limit: int = 20, root_only: bool = True
    ) -> list[SessionRow]: ...

    async def find_sessions(self, prefix: str) -> list[SessionRow]: ...

    async def usage_for_session(self, session_id: str) -> list[ModelCallRow]: ...

    async def usage_totals(self, since: str | None = None) -> list[UsageTotalRow]: ...


class BlobRecords(Protocol):
    """The `blobs` table: bytes by content address (a `BlobStore` several hosts share)."""

    async def put_blob(
        self, blob_id: str, mime_type: str, data: bytes, *, stored_at: float | None = None
    ) -> None:
        """Keeps `data` under `blob_id` (the sha256 hex of the bytes); an existing id: no-op.
        `stored_at`: the unix time retention counts from (None: now)."""
        ...

    async def get_blob(self, blob_id: str) -> tuple[str, bytes] | None:
        """(mime_type, data), or None when no blob has that id."""
        ...

    async def delete_blobs_before(self, cutoff: float) -> int:
        """Deletes the blobs stored before `cutoff` (unix seconds); how many there were."""
        ...


class ConversationStateRecords(Protocol):
    """The `conversation_states` table: each conversation's routing state, by compare-and-set."""

    async def load_conversation_state(self, key: str) -> ConversationStateRow | None: ...

    async def save_conversation_state(
        self, row: ConversationStateRow, *, expected_version: int
    ) -> bool:
        """Writes `row` (its version must be `expected_version + 1`, else ValueError) only if
        the stored version is `expected_version` (0: no row yet); False if another writer
        moved it on since."""
        ...


class PairingRecords(Protocol):
    """The `pairings` table: unknown senders' codes and the approved (bot/pipeline/pairing.py)."""

    async def pairing_request(self, request: PairingRequest) -> PairingTicket:
        """An approved sender passes; a live code is resent once `resend_s` has passed since it
        was last sent; a new code only while the instance has fewer than `max_pending` live."""
        ...

    async def pairing_decide(
        self, code: str, *, approve: bool, by: str, now: float, block_s: float
    ) -> PairingRow | None:
        """Approves or denies the live pending code (a denial stands `block_s`); the row as
        decided, or None when no live code is `code`."""
        ...

    async def pairing_rows(self, status: str, *, now: float, limit: int = 100) -> list[PairingRow]:
        """Live rows of `status` (a pending code not expired; every approval), newest first."""
        ...

    async def pairing_revoke(self, channel: str, user_id: str) -> bool:
        """Forgets an approval (the sender's next message pairs anew); False: none was there."""
        ...

    async def pairing_untold(self, channels: Collection[str], now: float) -> list[PairingRow]:
        """Approvals on `channels` whose sender nobody has been told of yet, taken for telling."""
        ...
