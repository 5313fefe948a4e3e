"""The seam through which a channel reads what its conversation said before: the stored
transcript, for a client that reloads after the server restarted (the app implements it on the
store: bot/pipeline/transcript.py), and durable claims, so a resent message id is known after a restart."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from adapters.base import ChatRef
from content.parts import Part


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """One message of a stored transcript: the user's (with the id the client gave it) or a
    final answer (with the id of the message it was shown in)."""

    role: Literal["user", "assistant"]
    message_id: str
    text: str
    parts: tuple[Part, ...] = ()  # the media the user sent with it


class ConversationHistory(Protocol):
    async def recent(self, chat: ChatRef, user_id: str) -> list[StoredMessage]:
        """The last messages of the conversation since its last `/new`, oldest first: only
        finished text, at most a fixed number (the implementation's cap)."""
        ...


class Claims(Protocol):
    async def claim(self, event_id: str) -> bool:
        """True the first time `event_id` is claimed (within a TTL), in any process."""
        ...

    async def release(self, event_id: str) -> None:
        """Forget the claim: what it stood for was refused, so its resend is a first."""
        ...
