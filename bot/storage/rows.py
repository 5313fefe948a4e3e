"""The store's rows as small frozen records (what a read returns), one a table or view."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


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
class TurnUsage:
    """A turn's model calls and tokens, every provider and specialist included."""

    model_calls: int
    input_tokens: int
    output_tokens: int
