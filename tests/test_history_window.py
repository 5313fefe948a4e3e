"""The history window's cost per turn follows what was added, not the length of the session."""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

from agent.history import HistoryWindow, fit_history
from agent.types import Message

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
    window = HistoryWindow(max_kept=2)
    sessions = {f"s{n}": _turns(0, 3) for n in range(3)}
    for session, rows in sessions.items():
        window.fit(session, rows, 1000)
    again = CountingRows(sessions["s0"] + _turns(3, 1))
    assert window.fit("s0", again, 1000) == fit_history(again.rows, 1000)
    assert again.read > 8  # s0's were dropped: built again from its rows
