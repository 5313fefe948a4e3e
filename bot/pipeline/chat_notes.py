"""The lines an answer ends with when it did not come from the model the user expects.

A conversation switched to another model (`/model`) sees which one answered; an answer a
backup model gave (the chosen or default model failed over: agent/providers/resilient.py) says
so — once, in that answer, never as a second message; and the budget's move to the cheaper
model is told with the first answer it gives (bot/pipeline/chat_choice.py).
"""

from __future__ import annotations

from bot.pipeline.chat_choice import TurnChoice
from bot.pipeline.turn_line import Tally, current_tally
from content.texts import t


def answer_notes(choice: TurnChoice | None, tally: Tally | None, language: str) -> list[str]:
    """The notes, in order: the budget's, then who answered (the backup, or a chosen model)."""
    notes: list[str] = []
    if choice is not None and choice.budget_notice:
        notes.append(choice.budget_notice)
    if tally is not None and tally.failed_over:
        notes.append(t(language, "model.backup", model=tally.served_by or "?"))
    elif choice is not None and choice.model is not None:
        notes.append(t(language, "model.answered_by", model=choice.model.display))
    return notes


def with_notes(text: str, notes: list[str]) -> str:
    """`text` with each note on a line of its own below it (the one final edit carries them)."""
    if not notes:
        return text
    return "\n\n".join([text, *(f"— {note}" for note in notes)])


def noted(status: str, text: str, choice: TurnChoice | None, language: str) -> str:
    """A turn's final text with its notes: all of them on an answer; on anything else (a
    refusal, a failure) only the budget's, which is told once and must not be lost."""
    if status == "completed":
        return with_notes(text, answer_notes(choice, current_tally(), language))
    budget = choice.budget_notice if choice is not None else None
    return with_notes(text, [budget] if budget else [])
