"""Where an interrupted turn stands, from what it recorded: replay its results, never its tools.

A turn records its user message, each model step (before that step's tools run) and each tool
result as the call ends; the audit log has every finished call too. From these, `replay_point`
rebuilds the turn so far and says how the loop goes on:

- the model's last step was its answer: that answer is delivered, nothing runs again;
- a call of the last step left a result (in the messages, or only in the audit log when the
  crash fell between the two writes): the result is replayed, the tool is not called again;
- a call that had started and left no result runs again only if its tool is read-only or
  idempotent (a write that replaces itself), whatever its source, or is no tool at all (that call only ever returns an
  error). Anything else (a payment order, a specialist) may have happened once already, so the
  turn is `Unresumable` rather than risk doing it twice;
- a call that waited for a person's approval (`gated`) never started: it goes back to the
  approval gate, which runs it (allowed, once), answers for it (denied, expired) or pauses again.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent.loop import NO_ANSWER, Resumed
from agent.types import Message, ToolCall
from content.parts import Part, part_from_json
from tools.registry import ToolRegistry


class Unresumable(Exception):
    """The turn cannot go on safely; the message says why (for the log and `turns.error`)."""


@dataclass(frozen=True, slots=True)
class ReplayPoint:
    messages: tuple[Message, ...]  # the turn so far, in order, to follow the history
    recovered: tuple[Message, ...] = ()  # results found only in the audit log: record them
    resumed: Resumed | None = None  # how the loop goes on; None when `final` is set
    final: str | None = None  # the answer was recorded already: deliver it, run nothing
    display: tuple[Mapping[str, Any], ...] = ()  # what the recorded results showed
    parts: tuple[Part, ...] = ()  # the media they made (a chart, a PDF): the answer's


def replay_point(
    own: Sequence[Message],
    audit: Sequence[Mapping[str, Any]],
    registry: ToolRegistry,
    allowed: Collection[str],
    gated: Collection[str] = (),
) -> ReplayPoint:
    """`own`: the turn's recorded messages in order; `audit`: the audit rows of the same
    session and turn, in order (`call_id`, `result`, `ok`, `extra` as a dict); `gated`: the
    ids of calls asked about whose approval was not used (they never ran)."""
    if not own or own[0].role != "user":
        raise Unresumable("the turn recorded no user message")
    own = one_result_per_call(own)
    display, made = _displays(audit), _made(audit)
    last = own[-1]
    if last.role == "assistant" and not last.tool_calls:
        final = last.content if last.content.strip() else NO_ANSWER
        return ReplayPoint(tuple(own), final=final, display=display, parts=made)
    rounds = sum(1 for m in own if m.role == "assistant")
    step = max((i for i, m in enumerate(own) if m.role == "assistant"), default=-1)
    if step < 0:
        return ReplayPoint(tuple(own), resumed=Resumed(rounds_done=0))
    answered = {m.tool_call_id for m in own[step + 1 :] if m.role == "tool"}
    audit_by_call = _audit_rows(own[:step], audit)
    recovered: list[Message] = []
    pending: list[ToolCall] = []
    for call in own[step].tool_calls:
        if call.id in answered:
            continue
        row = audit_by_call.get(call.id)
        if row is not None:
            text, ok = str(row["result"]), bool(row["ok"])
            parts = _parts((row.get("extra") or {}).get("parts"))
            recovered.append(Message("tool", text, (), call.id, call.name, not ok, parts=parts))
        elif call.name not in allowed or call.id in gated or _rerun_safe(registry, call.name):
            pending.append(call)
        else:
            raise Unresumable(
                f"{call.name} (call {call.id}) had started and left no result; it is not"
                " marked read-only or idempotent, so it is not run a second time"
            )
    resumed = Resumed(rounds_done=rounds, pending=tuple(pending), display=display, parts=made)
    return ReplayPoint((*own, *recovered), tuple(recovered), resumed, display=display, parts=made)


def one_result_per_call(own: Sequence[Message]) -> list[Message]:
    """The turn's messages with each call's first result only, and no result of a call that
    is not open. A process that stalled past its lease and woke could write a result for a call
    the process that took the turn over had answered (agent/fence.py stops that, but a write
    already under way when the lease ran out may land): the vendors refuse a `tool_use` id with
    two results, or a result whose call is not in the step before it."""
    kept: list[Message] = []
    waiting: set[str] = set()
    for message in own:
        if message.role == "tool":
            if message.tool_call_id not in waiting:
                continue
            waiting.discard(message.tool_call_id)
        else:
            waiting = {call.id for call in message.tool_calls}
        kept.append(message)
    return kept


def open_calls(own: Sequence[Message]) -> list[ToolCall]:
    """The calls of the turn's last step that have no result recorded."""
    step = max((i for i, m in enumerate(own) if m.role == "assistant"), default=-1)
    if step < 0:
        return []
    answered = {m.tool_call_id for m in own[step + 1 :] if m.role == "tool"}
    return [call for call in own[step].tool_calls if call.id not in answered]


def _rerun_safe(registry: ToolRegistry, name: str) -> bool:
    info = registry.info(name)
    return info is None or info.annotations.repeatable  # no such tool: it only returns an error


def _audit_rows(
    earlier: Sequence[Message], audit: Sequence[Mapping[str, Any]]
) -> dict[str, Mapping[str, Any]]:
    """The audit row of each call id of the last step. A server that repeats call ids across
    rounds ("call_0_0" each time) gets its earlier rows skipped, one per earlier result."""
    seen: dict[str, int] = {}
    for message in earlier:
        if message.role == "tool" and message.tool_call_id:
            seen[message.tool_call_id] = seen.get(message.tool_call_id, 0) + 1
    rows: dict[str, Mapping[str, Any]] = {}
    for row in audit:
        call_id = str(row["call_id"])
        if seen.get(call_id, 0) > 0:
            seen[call_id] -= 1
        else:
            rows.setdefault(call_id, row)
    return rows


def _displays(audit: Sequence[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
    """What the replayed results showed (a payment card, say), in the order they were made."""
    hints: list[Mapping[str, Any]] = []
    for row in audit:
        extra = row.get("extra") or {}
        hints.extend(extra.get("display") or ())
    return tuple(hints)


def _made(audit: Sequence[Mapping[str, Any]]) -> tuple[Part, ...]:
    """The media the recorded results made, in order (kept in their audit rows' `extra`)."""
    return tuple(part for row in audit for part in _parts((row.get("extra") or {}).get("parts")))


def _parts(items: Any) -> tuple[Part, ...]:
    return tuple(part_from_json(item) for item in items) if isinstance(items, list) else ()


def history_before(
    rows: list[tuple[str, Message]], turn_id: str, own: Sequence[Message]
) -> list[tuple[str, Message]]:
    """The session's rows (turn id, message) without the turn's own, which `own` (the replay's
    messages, its user message first) goes on from; `rows` (the caller's: `Store.load_history`
    makes a new list each time) may be cut in place.

    A turn's rows are usually the newest, the very objects it recorded (the store's history
    cache hands them back): when the last `len(own)` rows are the turn's and are `own` itself,
    from its first row on, they are all of the turn's rows, cut off the end. Searching every row
    instead cost each turn ~40 ns a message (75 us at 2,000). Otherwise (rows read back from
    the database, a result found only in the audit log, another writer's row after the turn's
    user message) every row is looked at."""
    n = len(own)
    if 0 < n <= len(rows):
        tail = rows[len(rows) - n :]
        if all(row[0] == turn_id and row[1] is m for row, m in zip(tail, own, strict=True)):
            del rows[len(rows) - n :]  # in place: a copy was ~7 instructions a row
            return rows
    return [row for row in rows if row[0] != turn_id]
