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
    ApprovalRow,
    AuditRow,
    ConversationRow,
    ConversationStateRow,
    HandoffEventRow,
    HandoffRow,
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
from bot.storage.schedules import Refusal, ScheduleRow, Settle
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

    async def claim_event_ahead(self, event_id: str, ttl_s: float) -> bool:
        """`claim_event` made by a channel for this process's gateway: its own `claim_event` of
        `event_id` then returns True once, without writing."""
        ...


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

    async def get_turn(self, turn_id: str) -> TurnRow | None: ...

    async def turn_for_events(self, conversation_key: str, event_ids: list[str]) -> TurnRow | None:
        """The conversation's newest turn (finished or not) that took any of these inbound
        events; None if none of its newest turns did."""
        ...

    async def update_turn_placeholder(self, turn_id: str, placeholder: dict[str, Any]) -> None:
        """The placeholder's handle record, once it is posted (the turn was created before)."""
        ...

    async def begin_resume(self, turn_id: str) -> ResumedTurn | None:
        """If the turn is still `running`: add one to its `resume_attempts` and return it, with
        its session's `user_id` and `agent_id`, in one transaction; a turn `waiting` for
        approval becomes `running` again, its attempts as they were. Else None."""
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
        self,
        *,
        channel: str | None = None,
        user_id: str | None = None,
        limit: int = 50,
        search: str | None = None,
        offset: int = 0,
    ) -> list[ConversationRow]: ...

    async def recent_sessions(
        self, *, limit: int = 20, root_only: bool = True
    ) -> list[SessionRow]: ...

    async def find_sessions(self, prefix: str) -> list[SessionRow]: ...

    async def usage_for_session(self, session_id: str) -> list[ModelCallRow]: ...

    async def usage_totals(self, since: str | None = None) -> list[UsageTotalRow]: ...

    async def conversation_chat(self, conversation_key: str) -> ChatRef | None:
        """Where a conversation's replies go (the admin's "take over" answers there)."""
        ...


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


class ApprovalRecords(Protocol):
    """The `approvals` and `approval_grants` tables (bot/storage/approvals.py): calls asked
    about before they run, each decided once and used once, and "always allow" grants."""

    async def create_approval(self, row: ApprovalRow) -> ApprovalRow: ...

    async def approval(self, approval_id: str) -> ApprovalRow | None: ...

    async def approval_for_call(self, turn_id: str, call_id: str) -> ApprovalRow | None: ...

    async def decide_approval(
        self, approval_id: str, *, status: str, decision: str, by: str, at: float
    ) -> ApprovalRow | None:
        """The decided row; None when it was not pending any more (decided once)."""
        ...

    async def use_approval(self, approval_id: str) -> bool:
        """`allowed` -> `used`; False when it was used already (the call runs once)."""
        ...

    async def set_approval_notice(self, approval_id: str, notice: str) -> None: ...

    async def pending_approvals(self, conversation_key: str) -> list[ApprovalRow]: ...

    async def expired_approvals(self, now: float) -> list[ApprovalRow]: ...

    async def unresumed_approvals(self, before: float) -> list[ApprovalRow]:
        """Decided before `before`, its turn still `waiting` (the decider died first)."""
        ...

    async def next_approval_expiry(self) -> float | None: ...

    async def grant_approval(
        self, conversation_key: str, tool_name: str, target: str, *, by: str, at: float
    ) -> None: ...

    async def approval_granted(
        self, conversation_key: str, tool_name: str, target: str
    ) -> bool: ...


class ScheduleRecords(Protocol):
    """The `schedules` table (bot/storage/schedules.py): scheduled messages, each occurrence
    claimed by one process with a fence."""

    async def add_schedule(
        self, row: ScheduleRow, *, max_per_user: int, max_per_conversation: int
    ) -> Refusal | None: ...

    async def get_schedule(self, schedule_id: str) -> ScheduleRow | None: ...

    async def conversation_schedules(self, conversation_key: str) -> list[ScheduleRow]: ...

    async def recent_schedules(self, limit: int = 100) -> list[ScheduleRow]: ...

    async def cancel_schedule(self, schedule_id: str, note: str) -> bool: ...

    async def claim_due_schedules(self, limit: int, lease_s: float) -> list[ScheduleRow]: ...

    async def schedules_sending(self, marks: Sequence[tuple[str, int, str]]) -> set[str]: ...

    async def extend_schedule_leases(
        self, held: Sequence[tuple[str, int]], lease_s: float
    ) -> set[str]: ...

    async def settle_schedules(self, settles: Sequence[Settle]) -> set[str]: ...

    async def next_schedule_in(self) -> float | None: ...


class HandoffRecords(Protocol):
    """Handoffs to a person and their audit trail (bot/storage/handoffs.py)."""

    async def save_handoff(self, row: HandoffRow) -> None:
        """Writes the whole row (a new one, or a change of one)."""
        ...

    async def get_handoff(self, handoff_id: str) -> HandoffRow | None: ...

    async def handoff_by_thread(self, thread: str) -> HandoffRow | None: ...

    async def list_handoffs(
        self,
        *,
        statuses: Sequence[str] = (),
        search: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[HandoffRow]: ...

    async def audit_handoff(
        self, handoff_id: str, *, at: float, actor: str, action: str, detail: str = ""
    ) -> None: ...

    async def handoff_events(self, handoff_id: str) -> list[HandoffEventRow]: ...
