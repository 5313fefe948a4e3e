"""What a person reads when a call waits for approval: the tool, its arguments as a person reads
them, and the three buttons (a `confirm` display hint) — or, where buttons cannot be pressed or
the user is not the one to answer, how to answer or who will."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.approvals.policy import ACTION_PREFIX
from content.texts import t
from tools.approval import Pause, readable
from tools.display import button, confirm


def question(language: str, tool: str, status: str, arguments: Mapping[str, Any]) -> str:
    """The request in words: what is about to happen, and with what."""
    what = f"**{status}** (`{tool}`)" if status else f"`{tool}`"
    rows = "\n".join(f"• {label}: {value}" for label, value in readable(tool, arguments))
    return t(language, "approval.asks", tool=what, arguments=rows).strip()


def buttons_hint(language: str, text: str, approval_id: str) -> Mapping[str, Any]:
    """The `confirm` hint: Allow once, Always allow (this conversation), Deny."""
    return confirm(
        text,
        [
            button(
                t(language, "approval.allow_once"),
                f"{ACTION_PREFIX}once",
                value=approval_id,
                style="primary",
            ),
            button(
                t(language, "approval.allow_always"), f"{ACTION_PREFIX}always", value=approval_id
            ),
            button(
                t(language, "approval.deny"),
                f"{ACTION_PREFIX}deny",
                value=approval_id,
                style="danger",
            ),
        ],
    )


def pause(
    language: str,
    approval_id: str,
    asked: str,
    *,
    user_answers: bool,
) -> Pause:
    """The turn's live message while it waits: with the buttons when the user answers (and how
    to answer by text, for a channel that shows no buttons); else who is asked."""
    if not user_answers:
        return Pause(approval_id, f"{asked}\n\n{t(language, 'approval.waiting_approver')}")
    text = f"{asked}\n\n{t(language, 'approval.reply_hint')}"
    return Pause(approval_id, text, (buttons_hint(language, asked, approval_id),))


def verdict_line(language: str, status: str, who: str) -> str:
    """What the operator place's message says once decided ("Allowed once by slack:U1")."""
    return t(language, f"approval.decided_{status}", who=who)
