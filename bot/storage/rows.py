"""The store's rows as small frozen records (what a read returns), one a table or view."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


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
