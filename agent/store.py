"""The storage the agent runtime needs, as a protocol; `bot.storage.SqliteStore` implements it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from agent.providers.base import Provider
from agent.types import AuditRecord, Message, Usage


@dataclass(frozen=True, slots=True)
class UsageRow:
    """One model call's tokens, attributed to the provider and model that served it."""

    provider: str
    model: str
    input_tokens: int
    output_tokens: int


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
        """The session's messages in order (at least the newest few thousand), each with the id
        of the turn that wrote it: a new list each call, the caller's to change."""
        ...

    async def append_messages(
        self,
        session_id: str,
        turn_id: str,
        messages: Sequence[Message],
        usage: Sequence[UsageRow] = (),
    ) -> None:
        """`usage`: rows for `usage` under the same session and turn, in the same transaction
        (the model call that wrote a message is recorded with it: one commit, not two)."""
        ...

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


class UsageWriter(Protocol):
    """Where `UsageLog.write` puts its rows: a `Store`, or the turn's fenced writes."""

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


class UsageLog:
    """Collects a loop's usage (`run_loop(on_usage=...)`) and writes it: one `usage` row per model
    call, attributed to the provider and model that actually served it (fallbacks included)."""

    def __init__(self, provider: Provider, model: str | None) -> None:
        self.provider = provider
        self.model = model
        self.usages: list[Usage] = []

    async def __call__(self, provider: Provider, usage: Usage) -> None:
        self.usages.append(usage)

    def take(self) -> list[UsageRow]:
        """The rows of the usage collected since the last `take` or `write`, now written by the
        caller (with the message its model call wrote)."""
        rows = [
            UsageRow(
                usage.provider or self.provider.name,
                usage.model or self.model or self.provider.model,
                usage.input_tokens,
                usage.output_tokens,
            )
            for usage in self.usages
        ]
        self.usages.clear()
        return rows

    async def write(self, store: UsageWriter, *, session_id: str, turn_id: str | None) -> None:
        """Write the usage not taken yet (a call that wrote no message: a stopped turn's)."""
        for row in self.take():
            await store.record_usage(
                session_id=session_id,
                turn_id=turn_id,
                provider=row.provider,
                model=row.model,
                input_tokens=row.input_tokens,
                output_tokens=row.output_tokens,
            )
