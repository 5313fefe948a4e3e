"""`replay_point`: what an interrupted turn's records say about how it goes on."""

from __future__ import annotations

from typing import Any

import pytest

from agent.loop import NO_ANSWER
from agent.replay import Unresumable, history_before, replay_point
from agent.types import Message, ToolCall
from tools.base import ToolContext
from tools.registry import ToolRegistry, tool


@tool
async def charge(ctx: ToolContext) -> str:
    """Charge the card."""
    return "charged"


@tool(idempotent=True)
async def lookup(ctx: ToolContext) -> str:
    """Look something up."""
    return "found"


REGISTRY = ToolRegistry([charge, lookup])
ALLOWED = {"charge", "lookup"}


def _audit(call_id: str, result: str, **extra: Any) -> dict[str, Any]:
    return {"call_id": call_id, "tool_name": "?", "result": result, "ok": 1, "extra": extra}


def test_a_server_repeating_call_ids_does_not_get_an_earlier_rounds_result() -> None:
    """Some compatible servers send no ids, so every round's first call is "call_0_0"."""
    first, second = ToolCall("call_0_0", "lookup", "{}"), ToolCall("call_0_0", "charge", "{}")
    own = [
        Message("user", "pay"),
        Message("assistant", "", tool_calls=(first,)),
        Message("tool", "found", tool_call_id="call_0_0", name="lookup"),
        Message("assistant", "", tool_calls=(second,)),
    ]
    with pytest.raises(Unresumable, match="charge"):
        replay_point(own, [_audit("call_0_0", "found")], REGISTRY, ALLOWED)
    point = replay_point(
        own, [_audit("call_0_0", "found"), _audit("call_0_0", "charged")], REGISTRY, ALLOWED
    )
    assert [m.content for m in point.recovered] == ["charged"]
    assert point.resumed is not None and point.resumed.pending == ()
    assert point.resumed.rounds_done == 2


def test_calls_of_the_last_step_replay_rerun_or_refuse_by_their_flag() -> None:
    calls = (ToolCall("a", "lookup", "{}"), ToolCall("b", "nosuch", "{}"))
    own = [Message("user", "q"), Message("assistant", "", tool_calls=calls)]
    card = {"type": "card", "title": "T"}
    point = replay_point(own, [_audit("x", "old", display=[card])], REGISTRY, ALLOWED)
    assert point.resumed is not None
    assert [c.id for c in point.resumed.pending] == ["a", "b"]  # a read; no such tool: an error
    assert point.resumed.display == (card,)


def test_a_recorded_answer_is_final_and_an_empty_one_gets_the_fallback() -> None:
    own = [Message("user", "q"), Message("assistant", "A.")]
    assert replay_point(own, [], REGISTRY, ALLOWED).final == "A."
    own = [Message("user", "q"), Message("assistant", " ")]
    assert replay_point(own, [], REGISTRY, ALLOWED).final == NO_ANSWER


def test_a_turn_without_its_user_message_is_unresumable() -> None:
    with pytest.raises(Unresumable, match="no user message"):
        replay_point([], [], REGISTRY, ALLOWED)


def test_a_second_result_for_a_call_is_not_replayed() -> None:
    """A stalled process woke and wrote "not finished" for a call the process that took the turn
    over had answered already: the turn goes on with the first result only."""
    first = ToolCall("a", "lookup", "{}")
    own = [
        Message("user", "q"),
        Message("assistant", "", tool_calls=(first,)),
        Message("tool", "found", tool_call_id="a", name="lookup"),
        Message("tool", "not finished", tool_call_id="a", name="lookup", is_error=True),
        Message("assistant", "", tool_calls=(ToolCall("b", "lookup", "{}"),)),
        Message("tool", "late", tool_call_id="a", name="lookup"),  # not of this step's calls
    ]
    point = replay_point(own, [], REGISTRY, ALLOWED)
    assert [(m.tool_call_id, m.content) for m in point.messages if m.role == "tool"] == [
        ("a", "found")
    ]
    assert point.resumed is not None and [c.id for c in point.resumed.pending] == ["b"]


def _rows(*rows: tuple[str, Message]) -> list[tuple[str, Message]]:
    return list(rows)


def test_a_new_turns_message_is_cut_off_the_history() -> None:
    before = [("t1", Message("user", "hi")), ("t1", Message("assistant", "hello"))]
    user = Message("user", "and now?")
    assert history_before([*before, ("t2", user)], "t2", (user,)) == before


def test_a_row_written_after_the_turns_message_is_kept_and_the_turns_found() -> None:
    """An operator's message recorded between the turn's user message and the read: the turn's
    row is not the last, so every row is looked at."""
    user, operator = Message("user", "help"), Message("assistant", "a person here")
    rows = _rows(("t1", Message("user", "hi")), ("t2", user), ("op", operator))
    assert history_before(rows, "t2", (user,)) == [rows[0], ("op", operator)]


def test_the_turns_rows_read_back_as_new_objects_are_found_by_their_turn() -> None:
    user = Message("user", "again")
    read_back = Message("user", "again")  # equal, not the same object: from the database
    rows = _rows(("t1", Message("user", "hi")), ("t2", read_back))
    assert history_before(rows, "t2", (user,)) == [rows[0]]


def test_a_resumed_turn_with_a_second_result_drops_every_row_of_the_turn() -> None:
    """`one_result_per_call` left a duplicate result out of the replay: the tail is not the
    replay's messages, and the duplicate must not stay in the history either."""
    call = ToolCall("c1", "lookup", "{}")
    user, step = Message("user", "look it up"), Message("assistant", "", (call,))
    result = Message("tool", "found", tool_call_id="c1", name="lookup")
    again = Message("tool", "found", tool_call_id="c1", name="lookup")
    answer = Message("assistant", "it is there")
    earlier = ("t1", Message("user", "hi"))
    rows = _rows(earlier, *(("t2", m) for m in (user, step, result, again, answer)))
    assert history_before(rows, "t2", (user, step, result, answer)) == [earlier]


def test_a_result_found_only_in_the_audit_log_is_not_in_the_rows() -> None:
    call = ToolCall("c1", "lookup", "{}")
    user, step = Message("user", "look it up"), Message("assistant", "", (call,))
    recovered = Message("tool", "found", tool_call_id="c1", name="lookup")
    earlier = ("t1", Message("user", "hi"))
    rows = _rows(earlier, ("t2", user), ("t2", step))
    assert history_before(rows, "t2", (user, step, recovered)) == [earlier]
