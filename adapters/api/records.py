"""What the sessions API keeps: sessions (each owned by one API key) and their transcript.

`SessionRecords` is the seam: `bot.storage` implements it on the gateway's database (so sessions
outlive a restart); `MemorySessionRecords` keeps them in this process, for a channel built alone.
tests/test_api_records.py checks both against the same contract.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from content.parts import Part

Role = Literal["user", "assistant"]
# user messages are `received`, or `dropped` from the queue by a `/stop` before a turn took them
# (adapters/api/dropped.py); a bot message is `pending` from its placeholder to its final text,
# then `completed`, or `stopped` (a stop ended it: its text is what it had shown, then the mark)
Status = Literal["received", "dropped", "pending", "completed", "stopped"]


def now() -> str:
    return datetime.now(UTC).isoformat()


@dataclass(frozen=True, slots=True)
class ApiSession:
    id: str
    key_id: str  # the API key that created it: the only one that may see it
    user_id: str | None = None  # the client's own id for its user, if it gave one
    created_at: str = field(default_factory=now)


@dataclass(frozen=True, slots=True)
class ApiMessage:
    session_id: str
    message_id: str  # the client's `client_message_id` for user messages; `m_…` for the bot's
    role: Role
    text: str
    status: Status
    reply_to: str | None = None
    display: tuple[Mapping[str, Any], ...] = ()
    action: Mapping[str, Any] | None = None  # a button press: action_id, value, label, message_id
    seq: int = 0  # the session's event seq when a user message was taken (resends resume there)
    created_at: str = field(default_factory=now)
    position: int = 0  # set by the records: increasing in the order messages were added
    parts: tuple[Part, ...] = ()  # the files it came or went out with, by reference

    def public(
        self, render: Callable[[Sequence[Part]], list[dict[str, Any]]] | None = None
    ) -> dict[str, Any]:
        """The message as the history endpoint shows it; its files as `attachments`, with links
        `render` makes now (none without it)."""
        return {
            "id": self.message_id,
            "role": self.role,
            "text": self.text,
            "status": self.status,
            "reply_to": self.reply_to,
            "display": [dict(hint) for hint in self.display],
            "action": None if self.action is None else dict(self.action),
            "created_at": self.created_at,
            "position": self.position,
            "attachments": render(self.parts) if render is not None and self.parts else [],
        }


class SessionRecords(Protocol):
    """The contract (every implementation passes tests/test_api_records.py):

    - `add_api_message` of a new (session, message_id) appends it with the next `position`;
      of a known one it updates `text`, `status`, `display` and `parts` and keeps the position.
    - `api_reply` is the newest assistant message with that `reply_to`, or None.
    - `api_messages` returns at most `limit` messages in position order: those after `after`
      (the oldest of them; with `before` too, only those between), else those before `before`
      (the newest of them), else the newest `limit`.
    """

    async def create_api_session(self, session: ApiSession) -> None: ...

    async def api_session(self, session_id: str) -> ApiSession | None: ...

    async def add_api_message(self, message: ApiMessage) -> ApiMessage: ...

    async def api_message(self, session_id: str, message_id: str) -> ApiMessage | None: ...

    async def api_reply(self, session_id: str, reply_to: str) -> ApiMessage | None:
        """The newest bot message replying to `reply_to`."""
        ...

    async def api_messages(
        self, session_id: str, *, limit: int, before: int | None = None, after: int | None = None
    ) -> list[ApiMessage]: ...


class MemorySessionRecords:
    """One process, nothing kept over a restart."""

    def __init__(self) -> None:
        self._sessions: dict[str, ApiSession] = {}
        self._messages: dict[str, dict[str, ApiMessage]] = {}
        self._positions = itertools.count(1)

    async def create_api_session(self, session: ApiSession) -> None:
        if session.id in self._sessions:
            raise ValueError(f"session {session.id!r} exists")
        self._sessions[session.id] = session
        self._messages[session.id] = {}

    async def api_session(self, session_id: str) -> ApiSession | None:
        return self._sessions.get(session_id)

    async def add_api_message(self, message: ApiMessage) -> ApiMessage:
        messages = self._messages.setdefault(message.session_id, {})
        known = messages.get(message.message_id)
        if known is None:
            kept = replace(message, position=next(self._positions))
        else:
            kept = replace(
                known,
                text=message.text,
                status=message.status,
                display=message.display,
                parts=message.parts,
            )
        messages[message.message_id] = kept
        return kept

    async def api_message(self, session_id: str, message_id: str) -> ApiMessage | None:
        return self._messages.get(session_id, {}).get(message_id)

    async def api_reply(self, session_id: str, reply_to: str) -> ApiMessage | None:
        replies = [
            m
            for m in self._messages.get(session_id, {}).values()
            if m.role == "assistant" and m.reply_to == reply_to
        ]
        return max(replies, key=lambda m: m.position, default=None)

    async def api_messages(
        self, session_id: str, *, limit: int, before: int | None = None, after: int | None = None
    ) -> list[ApiMessage]:
        ordered = sorted(self._messages.get(session_id, {}).values(), key=lambda m: m.position)
        if before is not None:
            ordered = [m for m in ordered if m.position < before]
        if after is not None:
            return [m for m in ordered if m.position > after][:limit]
        return ordered[-limit:] if limit else []
