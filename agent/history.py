"""Fit a session's history into the context budget: oldest turns go first, a turn goes whole."""

from __future__ import annotations

from collections.abc import Sequence

from agent.types import Message


def estimate_tokens(message: Message) -> int:
    """A cheap estimate (about four characters a token): no tokenizer on the hot path."""
    size = len(message.content) + 16
    for call in message.tool_calls:
        size += len(call.name) + len(call.arguments) + 16
    return size // 4 + 1


def fit_history(rows: Sequence[tuple[str, Message]], budget_tokens: int) -> list[Message]:
    """The newest whole turns whose messages fit `budget_tokens`.

    Turns are dropped whole, so a tool result never survives without the call that asked for it.
    """
    kept_from = len(rows)
    used = 0
    index = len(rows)
    while index > 0:
        turn_id = rows[index - 1][0]
        start = index
        cost = 0
        while start > 0 and rows[start - 1][0] == turn_id:
            start -= 1
            cost += estimate_tokens(rows[start][1])
        if used + cost > budget_tokens:
            break
        used += cost
        kept_from = start
        index = start
    kept = [message for _, message in rows[kept_from:]]
    # A history that starts mid-exchange (a stray tool result) would be rejected by the APIs.
    while kept and kept[0].role != "user":
        kept.pop(0)
    return kept
