"""What the bot's context keeps of a handoff: the operators' replies, and the marker at its end.

Both go into the conversation's active session, so the model, once it has the conversation
back, reads what the person said (and does not say it again) and a marker — "a person handled
this 10:02–10:15 UTC (Ana): summary" — so it neither stays silent nor thinks it never left. A
tool result saying "a person takes over now" stays in the history too; the marker after it is
what tells the model that this is over (a peer's bot stayed silent for good without one).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Final, Literal, Protocol

from agent.types import Message
from bot.handoff.model import clock_text
from bot.storage.rows import HandoffRow

RECAP: Final = 8  # the conversation's last messages shown to operators when a handoff opens
RECAP_CHARS: Final = 600  # of each


class History(Protocol):
    async def load_history(self, session_id: str) -> list[tuple[str, Message]]: ...

    async def append_messages(
        self, session_id: str, turn_id: str, messages: Sequence[Message]
    ) -> None: ...


SessionFor = Callable[[str, str, str], Awaitable[str]]  # (channel, conversation, user) → session


def marker(row: HandoffRow, ended_at: float) -> str:
    start = clock_text(row.taken_at or row.requested_at)
    name = row.operator_name or "a person"
    return (
        f"[Gateway note, not from the user: a person handled this {start}–"
        f"{clock_text(ended_at)} UTC ({name}): {row.summary or row.reason}. The conversation is"
        " back with you: carry on from here, and do not repeat what they said.]"
    )


class HandoffContext:
    def __init__(self, history: History, session_for: SessionFor) -> None:
        self.history = history
        self.session_for = session_for

    async def said(self, row: HandoffRow, name: str, text: str) -> None:
        """An operator's reply, as the bot will read it."""
        said = f"[{name}, a person on the team, wrote to the user:] {text}"
        await self._append(row, "assistant", said, f"handoff:{row.id}:reply")

    async def ended(self, row: HandoffRow, ended_at: float) -> None:
        await self._append(row, "user", marker(row, ended_at), f"handoff:{row.id}:end")

    async def recap(self, row: HandoffRow) -> str:
        """The conversation's last words before the handoff, for the operators' thread."""
        history = await self.history.load_history(await self.session(row))
        said = [m for _, m in history if m.role in ("user", "assistant") and m.content.strip()]
        lines = [
            f"{'user' if m.role == 'user' else 'bot'}: {m.content.strip()[:RECAP_CHARS]}"
            for m in said[-RECAP:]
        ]
        return "\n".join(lines)

    async def session(self, row: HandoffRow) -> str:
        return await self.session_for(row.channel, row.conversation_key, row.user_id)

    async def _append(
        self, row: HandoffRow, role: Literal["user", "assistant"], text: str, turn_id: str
    ) -> None:
        await self.history.append_messages(await self.session(row), turn_id, [Message(role, text)])
