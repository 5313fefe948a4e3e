"""Who may answer a request, and the words that answer it where there are no buttons."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from adapters.base import APPROVAL_ACTIONS, InboundMessage
from bot.storage.rows import ApprovalRow
from content.texts import DEFAULT_LANGUAGE, t

Decision = Literal["once", "always", "deny"]
DECISIONS: Final[tuple[Decision, ...]] = ("once", "always", "deny")
ACTION_PREFIX: Final = APPROVAL_ACTIONS  # + a decision: the buttons' action ids; value: the id
# the status each decision leaves a request in (then `used` once an allowed call runs)
STATUS: Final = {"once": "allowed", "always": "allowed", "deny": "denied"}


@dataclass(frozen=True, slots=True)
class ApprovalSettings:
    """`approvals:` as the gateway uses it (`tools` goes to the tool loops)."""

    approvers: frozenset[str] = frozenset()  # `<channel>:<user id>` or a bare user id
    timeout_s: float = 300.0
    place: str | None = None  # `slack:<instance>/<channel id>`

    def user_answers(self) -> bool:
        """Whether the conversation's own user answers (no approvers, no operator place)."""
        return not self.approvers and self.place is None


def presser(message: InboundMessage) -> str:
    """Who answered, as the audit log and `approvals.approvers` name them."""
    return f"{message.chat.channel}:{message.user_id}"


def may_answer(
    settings: ApprovalSettings, row: ApprovalRow, message: InboundMessage, place_key: str | None
) -> bool:
    """Named approvers answer wherever they are; with none named, anyone in the operator place
    does; with no place either, only the conversation's own user, in the conversation."""
    if settings.approvers:
        return presser(message) in settings.approvers or message.user_id in settings.approvers
    if settings.place is not None:
        key = message.chat.key  # the place's channel, or a thread in it
        return place_key is not None and (key == place_key or key.startswith(f"{place_key}:"))
    return message.conversation_key == row.conversation_key and message.user_id == row.user_id


def action_decision(message: InboundMessage) -> tuple[Decision, str] | None:
    """A press of one of the three buttons: the decision and the request's id."""
    action = message.action
    if action is None or not action.action_id.startswith(ACTION_PREFIX) or not action.value:
        return None
    kind = action.action_id.removeprefix(ACTION_PREFIX)
    for decision in DECISIONS:
        if kind == decision:
            return decision, action.value
    return None


def text_decision(message: InboundMessage) -> Decision | None:
    """A text reply that answers a request ("allow", "deny", or the words of the message's
    language); None for any other text, which is no answer."""
    if message.action is not None or message.attachments:
        return None
    said = message.text.strip().strip(".!").casefold()
    if not said or len(said) > 20:
        return None
    for language in dict.fromkeys((message.language or DEFAULT_LANGUAGE, DEFAULT_LANGUAGE)):
        for decision in DECISIONS:
            words = t(language, f"approval.words_{decision}").split(",")
            if said in {word.strip().casefold() for word in words}:
                return decision
    return None
