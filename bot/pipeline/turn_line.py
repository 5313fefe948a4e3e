"""One INFO line per turn, for operators: who (hashed), where, which model, how long, how it
ended, how many tokens.

A turn binds a `Tally` in a context variable (`tallying`); the app's model observer
(`TALLIES`, in the meter chain of bot/ops/operations.py) adds each model call's model and
tokens to the tally of the turn it ran in, its specialists' calls included (their tasks copy
the turn's context). `log_turn` writes the line: plain words in the text log, and the same
facts as fields in the JSON log (`fields`, bot/runtime/logs.py) beside the turn's ids, so
`jq 'select(.turn_id == "…")'` finds it. The user id is hashed: the line names a user across
turns without naming them (a pseudonym, not a secret: a short id can be guessed back).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from agent import log_context
from agent.providers.metered import ModelCall

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Tally:
    models: list[str] = field(default_factory=list)  # in first-call order, each once
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    # the coordinator's provider chain moved on to a backup, and which model answered it last:
    # the answer then says so (bot/pipeline/chat_notes.py), never a silent fallback
    failed_over: bool = False
    served_by: str | None = None


_current: ContextVar[Tally | None] = ContextVar("turn_tally", default=None)


@contextmanager
def tallying() -> Iterator[Tally]:
    """Count the model calls made in this block (and the tasks it starts) as one turn's."""
    tally = Tally()
    token = _current.set(tally)
    try:
        yield tally
    finally:
        _current.reset(token)


def current_tally() -> Tally | None:
    """The tally of the turn this code runs in, if any."""
    return _current.get()


class Tallies:
    """A model observer: each call counted into the tally of the turn it belongs to, if any."""

    def model_call(self, call: ModelCall) -> None:
        tally = _current.get()
        if tally is None:
            return
        tally.calls += 1
        tally.input_tokens += call.input_tokens
        tally.output_tokens += call.output_tokens
        name = f"{call.provider}:{call.model}"
        if name not in tally.models:
            tally.models.append(name)
        if call.outcome == "ok" and not _in_specialist():
            tally.served_by = call.model

    def model_retry(self, provider: str, model: str) -> None:
        return None

    def model_fallback(self, from_provider: str, to_provider: str) -> None:
        tally = _current.get()
        if tally is not None and not _in_specialist():  # the answer is the coordinator's
            tally.failed_over = True


def _in_specialist() -> bool:
    """Whether the model call runs in a specialist's task (agent/workers.py binds its id)."""
    return "task_id" in log_context.current()


TALLIES = Tallies()


def user_hash(user_id: str) -> str:
    return hashlib.sha256(b"bot user:" + user_id.encode()).hexdigest()[:16]


def log_turn(*, outcome: str, seconds: float, user_id: str) -> None:
    """The turn's line; its conversation, channel and turn id come from the log context."""
    tally = _current.get() or Tally()
    model = ",".join(tally.models) or "-"
    fields = {
        "user": user_hash(user_id),
        "model": model,
        "duration_ms": round(seconds * 1000),
        "outcome": outcome,
        "model_calls": tally.calls,
        "input_tokens": tally.input_tokens,
        "output_tokens": tally.output_tokens,
    }
    log.info(
        "turn %s in %d ms: model %s, %d call(s), %d+%d tokens, user %s",
        outcome,
        fields["duration_ms"],
        model,
        tally.calls,
        tally.input_tokens,
        tally.output_tokens,
        fields["user"],
        extra={"fields": fields},
    )
