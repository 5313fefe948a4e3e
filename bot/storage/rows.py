"""The store's rows as small frozen records (what a read returns), one a table or view.

A record's fields are its table's columns, named and ordered as in bot/storage/tables.py (a
view's: its query's columns); `bot.storage.tx.RowQuery` checks that once, when a query is made.
JSON columns are decoded where their reader decodes them (a turn's); the admin views show the
others as the text they are (a message's `tool_calls`, an audit row's `arguments`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from content.parts import Part


@dataclass(frozen=True, slots=True)
class ApprovalRow:
    """A call asked about before it runs (bot/approvals/): `status` is `pending`, then
    `allowed` (until the call runs: `used`), `denied`, `expired` or `dismissed`; `decision`
    what was pressed (`once`, `always`, `deny`, ...); `notice` the operator place's message."""

    id: str
    turn_id: str
    session_id: str
    call_id: str
    tool_name: str
    arguments: str  # JSON object, as the model sent it
    target: str  # what the call acts on ("" none): the scope of an "always allow"
    conversation_key: str
    channel: str
    user_id: str
    status: str
    decision: str | None
    decided_by: str | None
    created_at: float  # unix seconds
    expires_at: float
    decided_at: float | None
    notice: str | None


@dataclass(frozen=True, slots=True)
class ConversationStateRow:
    """A conversation's routing state (bot/routing): its mode (e.g. `agent`, `human`), who it is
    assigned to, its settings, and `version`, which each save moves on by one."""

    conversation_key: str
    mode: str
    assignee: str | None
    settings: Mapping[str, str]
    version: int
    updated_at: float  # unix seconds


@dataclass(frozen=True, slots=True)
class TurnRow:
    """A turn: the gateway's record of one reply (the `turns` table, JSON columns decoded)."""

    id: str
    session_id: str
    channel: str
    conversation_key: str
    inbound_event_ids: tuple[str, ...]
    placeholder: Mapping[str, Any] | None  # a handle record or a chat record (bot.storage.turns)
    status: str
    final_text: str | None
    error: str | None
    created_at: str
    finished_at: str | None
    resume_attempts: int
    # the user's messages as the channel showed them, each {"message_id", "text"}
    inbound_messages: tuple[Mapping[str, str], ...]
    final_parts: tuple[Part, ...] = ()  # the media the final answer went out with


@dataclass(frozen=True, slots=True)
class ResumedTurn(TurnRow):
    """A turn taken up again after a crash, with whose session it is."""

    user_id: str = ""
    agent_id: str = ""


@dataclass(frozen=True, slots=True)
class ToolCallRow:
    """One tool call of a turn, as the audit kept it (`extra` decoded)."""

    call_id: str
    tool_name: str
    result: str | None
    ok: bool
    extra: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class SessionRow:
    """A chat session (the `chat_sessions` table)."""

    id: str
    agent_id: str
    parent_session_id: str | None
    channel: str
    conversation_key: str
    user_id: str
    status: str
    persona_version: str | None
    created_at: str | None
    updated_at: str | None
    title: str | None


@dataclass(frozen=True, slots=True)
class ConversationRow(SessionRow):
    """A coordinator session as the admin's conversation list shows it."""

    failed_turns: int  # how many of its turns failed


@dataclass(frozen=True, slots=True)
class MessageRow:
    """A stored message (the `messages` table); `tool_calls` and `parts` as their JSON text."""

    id: int
    session_id: str
    turn_id: str
    role: str
    content: str
    tool_calls: str | None
    tool_call_id: str | None
    name: str | None
    is_error: int  # 0 or 1
    tokens_in: int | None
    tokens_out: int | None
    created_at: str | None
    parts: str | None


@dataclass(frozen=True, slots=True)
class AuditRow:
    """One tool call as the audit kept it (the `audit_logs` table), its JSON as text."""

    id: int
    session_id: str
    turn_id: str | None
    call_id: str
    tool_name: str
    arguments: str | None  # as the model sent them
    result: str | None  # truncated (bot.storage.AUDIT_RESULT_LIMIT)
    ok: int  # 0 or 1
    duration_ms: float | None
    created_at: str | None
    extra: str | None


@dataclass(frozen=True, slots=True)
class ModelCallRow:
    """One model call's tokens (the `usage` table)."""

    id: int
    session_id: str
    turn_id: str | None
    provider: str | None
    model: str | None
    input_tokens: int | None
    output_tokens: int | None
    created_at: str | None


@dataclass(frozen=True, slots=True)
class UsageTotalRow:
    """Model calls and tokens of one UTC day, channel, user and model (`-` where unknown)."""

    day: str
    channel: str
    user_id: str
    model: str
    calls: int
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class MemoryRow:
    """What a tool remembered for a user (the `memories` table)."""

    id: int
    user_id: str
    memory_type: str | None
    content: str
    category: str | None
    importance: int | None
    created_at: str | None
    updated_at: str | None
    tenant: str
    key: str | None


@dataclass(frozen=True, slots=True)
class OrderRow:
    """A payment order (the `orders` table)."""

    id: str
    tenant: str
    user_id: str
    session_id: str | None
    service: str
    category: str | None
    method: str | None
    amount: float
    currency: str
    status: str
    payment_url: str | None
    created_at: str | None
    expires_at: str | None


@dataclass(frozen=True, slots=True)
class TurnUsage:
    """A turn's model calls and tokens, every provider and specialist included."""

    model_calls: int
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class PairingRow:
    """An unknown sender's pairing (the `pairings` table): pending with a code, approved or
    denied. `chat` is where the sender is told (a chat record, JSON); times are unix seconds."""

    channel: str
    user_id: str
    code: str
    status: str  # pending | approved | denied
    chat: str
    user_name: str | None
    language: str | None
    created_at: float
    expires_at: float  # pending: the code's end; denied: when the sender may ask again
    sent_at: float  # when the code last went to the sender
    attempts: int  # the sender's messages while this row stood
    decided_at: float | None
    decided_by: str | None
    notified_at: float | None  # when a process took the approval notice to send


@dataclass(frozen=True, slots=True)
class HandoffRow:
    """A request for a person (the `handoffs` table): who asked, why, and how far it got.
    `status`: waiting, human, released, resolved, withdrawn, expired (bot/handoff/)."""

    id: str
    conversation_key: str
    channel: str
    chat: str  # the user's chat, as a chat record's JSON (bot.storage.turns.chat_record)
    user_id: str
    user_name: str | None
    language: str | None
    reason: str
    summary: str
    status: str
    operator: str | None
    operator_name: str | None
    requested_at: float  # unix seconds
    taken_at: float | None
    ended_at: float | None
    thread: str | None  # the operator place's thread (a Slack message ts)


@dataclass(frozen=True, slots=True)
class HandoffEventRow:
    """One audited action on a handoff: who (`actor`), what, when, with a short detail."""

    id: int
    handoff_id: str
    at: float  # unix seconds
    actor: str
    action: str
    detail: str
