"""Which turn a log line belongs to: conversation, turn, channel, persona, specialist task.

The gateway binds the turn's ids when it starts one (bot/pipeline/turn.py) and a specialist adds its task
id (agent/workers.py). They live in a context variable, so every task started inside the turn
(tool calls, a specialist, the channel's edits) carries them, and the JSON log format
(bot/runtime/logs.py) writes them on every line, whoever logs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar, Token
from types import MappingProxyType, TracebackType

FIELDS = ("conversation_key", "turn_id", "channel", "persona", "task_id")
_KNOWN = frozenset(FIELDS)

_current: ContextVar[Mapping[str, str]] = ContextVar("log_context", default=MappingProxyType({}))


def current() -> Mapping[str, str]:
    return _current.get()


class _Bound:
    """The fields of one `with bound(...)` block (a class, not a generator: every turn enters
    two, and @contextmanager cost more than the rest of the binding)."""

    __slots__ = ("_fields", "_token")

    def __init__(self, fields: Mapping[str, str]) -> None:
        self._fields = fields
        self._token: Token[Mapping[str, str]] | None = None

    def __enter__(self) -> None:
        self._token = _current.set(self._fields)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._token is not None:
            _current.reset(self._token)
            self._token = None


def bound(*, fresh: bool = False, **fields: str | None) -> _Bound:
    """Add `fields` (names from FIELDS; None leaves a field as it is) for the block; `fresh`:
    drop the fields bound outside first (a task inherits its creator's, which may be a turn's)."""
    if not _KNOWN.issuperset(fields):
        unknown = set(fields) - _KNOWN
        raise ValueError(f"unknown log context field(s) {sorted(unknown)}; known: {FIELDS}")
    merged = {} if fresh else dict(_current.get())
    for name, value in fields.items():
        if value is not None:
            merged[name] = value
    return _Bound(MappingProxyType(merged))
