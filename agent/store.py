"""The storage the agent runtime needs, as a protocol; `bot.storage.SqliteStore` implements it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from agent.types import AuditRecord, Message


class Store(Protocol):
    async def create_session(
        self,
        *,
        agent_id: str,
        channel: str,
        conversation_key: str,
        user_id: str,
        parent_session_id: str | None = None,
        persona_version: str | None = None,
    ) -> str: ...

    async def set_session_status(self, session_id: str, status: str) -> None: ...

    async def load_history(self, session_id: str) -> list[tuple[str, Message]]:
        """Every message of the session in order, each with the id of the turn that wrote it."""
        ...

    async def append_messages(
        self, session_id: str, turn_id: str, messages: Sequence[Message]
    ) -> None: ...

    async def record_tool_call(self, record: AuditRecord) -> None: ...

    async def record_usage(
        self,
        *,
        session_id: str,
        turn_id: str | None,
        provider: str,
        model: str,
        input_tokens: int,
        output_tokens: int,
    ) -> None: ...
