"""Which turn a log line belongs to: conversation, turn, channel, persona, specialist task.

The gateway binds the turn's ids when it starts one (bot/turn.py) and a specialist adds its task
id (agent/workers.py). They live in a context variable, so every task started inside the turn
(tool calls, a specialist, the channel's edits) carries them, and the JSON log format
(bot/logs.py) writes them on every line, whoever logs it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType

FIELDS = ("conversation_key", "turn_id", "channel", "persona", "task_id")

_current: ContextVar[Mapping[str, str]] = ContextVar("log_context", default=MappingProxyType({}))


def current() -> Mapping[str, str]:
    return _current.get()


@contextmanager
def bound(*, fresh: bool = False, **fields: str | None) -> Iterator[None]:
    """Add `fields` (names from FIELDS; None leaves a field as it is) for the block; `fresh`:
    drop the fields bound outside first (a task inherits its creator's, which may be a turn's)."""
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise ValueError(f"unknown log context field(s) {sorted(unknown)}; known: {FIELDS}")
    merged = {} if fresh else dict(_current.get())
    merged.update({k: v for k, v in fields.items() if v is not None})
    token = _current.set(MappingProxyType(merged))
    try:
        yield
    finally:
        _current.reset(token)
