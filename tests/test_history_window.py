"""The history window's cost per turn follows what was added, not the length of the session."""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

from agent.history import HistoryWindow, fit_history
from agent.types import Message, ToolCall

Row = tuple[str, Message]


class CountingRows(Sequence[Row]):
    """Rows that count how many of them a fit reads (one per index, one per row of a slice)."""

    def __init__(self, rows: list[Row]) -> None:
        self.rows = rows
        self.read = 0

    def __len__(self) -> int:
        return len(self.rows)

    @overload
    def __getitem__(self, index: int) -> Row: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Row]: ...

    def __getitem__(self, index: int | slice) -> Row | Sequence[Row]:
        if isinstance(index, slice):
            part = self.rows[index]
            self.read += len(part)
            return part
        self.read += 1
        return self.rows[index]


def _turns(first: int, count: int) -> list[Row]:
    rows: list[Row] = []
    for turn in range(first, first + count):
        rows.append((f"t{turn}", Message("user", f"question {turn}")))
        rows.append((f"t{turn}", Message("assistant", f"answer {turn} " + "x" * (turn % 40))))
    return rows


def test_a_turn_reads_only_the_rows_added_since_the_last() -> None:
    window = HistoryWindow()
    rows = _turns(0, 1000)
    window.fit("s", rows, 100_000)
    grown = CountingRows(rows + _turns(1000, 1))
    kept = window.fit("s", grown, 100_000)
    assert kept == fit_history(grown.rows, 100_000)
    assert grown.read <= 8  # the two new rows (twice) and the last ones, not the 2,000 before


def test_the_window_matches_a_fresh_fit_while_it_slides_and_when_the_rows_change() -> None:
    window = HistoryWindow()
    rows: list[Row] = []
    for turn in range(300):
        rows += _turns(turn, 1)
        assert window.fit("s", rows, 300) == fit_history(rows, 300)  # the front drops off
    # the same number of rows, other objects (a store without a cache, or a trimmed one)
    rebuilt = [(turn_id, Message(m.role, m.content + "!")) for turn_id, m in rows]
    assert window.fit("s", rebuilt, 300) == fit_history(rebuilt, 300)
    assert window.fit("s", rebuilt[:10], 300) == fit_history(rebuilt[:10], 300)  # shorter


def test_only_the_newest_sessions_keep_their_messages() -> None:
    window = HistoryWindow(max_kept=12)  # messages: two sessions' six each
    sessions = {f"s{n}": _turns(0, 3) for n in range(3)}
    for session, rows in sessions.items():
        window.fit(session, rows, 1000)
    newest = CountingRows(sessions["s2"] + _turns(3, 1))
    assert window.fit("s2", newest, 1000) == fit_history(newest.rows, 1000)
    assert newest.read < 6  # kept: only the new rows read
    again = CountingRows(sessions["s0"] + _turns(3, 1))
    assert window.fit("s0", again, 1000) == fit_history(again.rows, 1000)
    assert again.read > 8  # s0's were dropped: built again from its rows


def test_sessions_taking_turns_past_the_bound_keep_a_share_of_their_windows() -> None:
    """Round robin over more than `max_kept`: least recently fitted out first, each session's
    window was pushed out just before its turn; now those kept stay kept."""
    window = HistoryWindow(max_kept=12)  # messages: two sessions' six each, not three
    sessions = {f"s{n}": _turns(0, 3) for n in range(3)}
    kept = 0
    for _ in range(10):
        for session, rows in sessions.items():
            counted = CountingRows(rows)
            assert window.fit(session, counted, 1000) == fit_history(rows, 1000)
            kept += counted.read < 6  # its window kept: not built again from its rows
    assert kept == 18  # two of the three, from the second round on


def _calling(turn: str, call_id: str, results: list[str]) -> list[Row]:
    """A turn with one tool call and `results` recorded for it, in order."""
    rows: list[Row] = [
        (turn, Message("user", f"question {turn}")),
        (turn, Message("assistant", "", tool_calls=(ToolCall(call_id, "lookup", "{}"),))),
    ]
    rows += [(turn, Message("tool", text, tool_call_id=call_id, name="lookup")) for text in results]
    rows.append((turn, Message("assistant", f"answer {turn}")))
    return rows


def _results(messages: Sequence[Message]) -> list[tuple[str | None, str]]:
    return [(m.tool_call_id, m.content) for m in messages if m.role == "tool"]


def test_a_second_result_for_one_call_is_left_out_of_the_history() -> None:
    """A process that stalled past its lease wrote "not finished" for a call the process that
    took the turn over had answered: the vendors refuse a call id with two results."""
    rows = _calling("t0", "c1", ["found", "not finished"]) + _turns(1, 1)
    assert _results(fit_history(rows, 100_000)) == [("c1", "found")]
    # found among the rows added since the last turn, and kept out while it is in the window
    window = HistoryWindow()
    clean = _turns(0, 2)
    assert window.fit("s", clean, 100_000) == fit_history(clean, 100_000)
    late_result = ("t2", Message("tool", "late", tool_call_id="c2", name="lookup"))
    grown = [*clean, *_calling("t2", "c2", ["found"]), late_result]
    assert _results(window.fit("s", grown, 100_000)) == [("c2", "found")]
    grown += _turns(3, 1)
    assert _results(window.fit("s", grown, 100_000)) == [("c2", "found")]
    # a result landing after a later step (not of the call before it) is left out too
    late = _calling("t0", "c1", ["found"]) + [("t0", Message("tool", "x", tool_call_id="c1"))]
    assert _results(fit_history(late, 100_000)) == [("c1", "found")]
    # it drops off with its turn
    assert window.fit("s", grown, 10) == fit_history(grown, 10)
