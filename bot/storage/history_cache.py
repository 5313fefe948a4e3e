"""The store's cache of session histories: bounded by bytes, and almost nothing in it for the GC.

Why this layout: CPython's cyclic collector walks every tracked object in each full collection,
~0.7 us apiece on a loaded machine, and a cached message as objects is ~2.5 of them (its
`Message`, the (turn id, message) tuple, an answer's `Usage`), all live, so collections free
nothing: 118 ms pauses after 33,000 turns in 250 conversations (issue 29). So most of the cache
is bytes: a session's history `marshal`led, one untracked object, read back when the session
is used again (a cold hit, ~1 us a message, against a query of its rows).

The sessions used most recently stay objects ("hot", `HOT_MESSAGES` messages in all; which
ones when more are talking: `HistoryCache._admits`): a turn needs the same `Message` objects as
the turn before, because the providers keep each message's wire bytes and what a request made
of the history on them (`Message.derived`, agent/providers/wire.py) and the history window
keeps its window (agent/history.py); a history decoded afresh costs the next model call the
encoding of all of it again. A session made hot stays hot whatever its length.

A history made hot (read back, or loaded) makes objects while the hot history it pushes out
frees as many old ones, and CPython counts the young generation as allocations minus
deallocations: under that churn (another conversation each turn) its young collections stopped
coming while the young generation filled with new histories, 22,000 objects walked in one young
collection (8-15 ms on a 400 MB heap, each object's references cold in the CPU's cache) while
10,000 conversations warmed. So the cache counts the objects it lets go of and, past the young
threshold, runs the young collection CPython's count missed.

The bound (`max_bytes`) counts each history's encoded size (hot ones estimated the same way:
text plus `ENTRY_BYTES` a message); past it the least recently used sessions go, cold first.
"""

from __future__ import annotations

import gc
import json
import marshal
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any, cast

from agent.history import makes_room
from agent.types import Message, Role, ToolCall, message_of
from content.parts import parts_from_json, parts_to_json

HistoryItem = tuple[str, Message]
IdRow = tuple[int, HistoryItem]  # message id, (turn id, message)
# A cached history keeps the newest messages only (the model never sees more than its context
# budget), trimmed in steps so the history window recounts rarely.
HISTORY_KEEP = 5000
HISTORY_TRIM_AT = 6000
# ~2 tracked objects each, frozen once they survive a collection of the middle generation
# (bot/runtime/heap.py), so the collector walks each about twice; ~420 bytes each (~70 MB in
# all, more than the cold bytes: RSS with 10,000 conversations cached 440 -> 510 MiB). Enough
# to hold 50 conversations of 1,000 turns talking at once: 32,000 held 300 turns each, and
# past that each turn read its history back (bench/sustained_bench.py: 0.6 ms of CPU a turn
# became 8-10 ms by 1,000 turns; `_admits` keeps what fits hot once they are more).
HOT_MESSAGES = 128000
MAX_BYTES = 256 * 1024 * 1024  # 10,000 conversations of 50 turns take ~80 MB
ENTRY_BYTES = 48  # what a message costs encoded beyond its text (its fields, the marshal codes)
ITEM_OBJECTS = 2  # tracked objects a hot message holds: its `Message`, its (turn id, message) tuple


def message_columns(m: Message) -> tuple[Any, ...]:
    """A message as stored: role, content, tool calls (JSON), call id, name, is_error, parts."""
    calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls]
    return (
        m.role,
        m.content,
        json.dumps(calls) if calls else None,
        m.tool_call_id,
        m.name,
        int(m.is_error),
        parts_to_json(m.parts) if m.parts else None,  # most messages are text only
    )


def message_from_columns(
    role: str,
    content: str,
    calls: str | None,
    call_id: str | None,
    name: str | None,
    is_error: int,
    parts: str | None,
) -> Message:
    """The message `message_columns` stored (its usage is not: that is the `usage` table's)."""
    tool_calls = (
        tuple(ToolCall(c["id"], c["name"], c["arguments"]) for c in json.loads(calls))
        if calls
        else ()
    )
    return message_of(  # all fields given: ~0.5 us a message, where `Message(...)` took 1.3
        cast(Role, role), content, tool_calls, call_id, name, bool(is_error), None,
        parts_from_json(parts) if parts else (),
    )  # fmt: skip


def _size(m: Message) -> int:
    size = len(m.content) + ENTRY_BYTES
    for call in m.tool_calls:
        size += len(call.id) + len(call.name) + len(call.arguments) + ENTRY_BYTES
    if m.parts:  # rare: most messages are text only
        size += len(parts_to_json(m.parts) or "")
    return size


class History:
    """A session's cached history, the id of the last message row it includes, its size, the
    bytes it was read back from (`packed`: its first `packed_count` items, as chunks), and
    when it was last used (the cache's count of `merge` calls)."""

    __slots__ = ("items", "last_id", "packed", "packed_count", "size", "used")

    def __init__(
        self, last_id: int, items: list[HistoryItem], size: int = 0, packed: Chunks = ()
    ) -> None:
        self.last_id = last_id
        self.items = items
        self.size = size
        self.packed = packed
        self.packed_count = len(items) if packed else 0
        self.used = 0


# A history's items as bytes: a tuple of chunks, each a marshalled tuple of rows, read with
# `marshal.loads` (one `marshal.load` on a stream of them read the stream a few bytes at a
# time: 2.7 us a message, 27 times `loads`, most of a cold hit's cost; bench/sustained_bench.py).
Chunks = tuple[bytes, ...]
# cold: (last id, size counted, when last used, *chunks): a tuple of atomics (flat: a tuple in
# a tuple stays tracked until a second collection), which the collector stops tracking once it
# has seen it. A history read back is one chunk again (its rows copied, not encoded again), and
# going cold again encodes only the items added since, as one more chunk; past MAX_CHUNKS, all
# of it as one.
Cold = tuple[Any, ...]  # (int, int, int, bytes, ...)
MAX_CHUNKS = 8
# A cold history that messages are appended to (`extend`) takes each append as one more chunk,
# up to this many before it is encoded as one again: an append never reads the history back.
MAX_APPENDED_CHUNKS = 32


def _rows(items: list[HistoryItem]) -> bytes:
    return marshal.dumps(tuple((turn_id, *message_columns(m)) for turn_id, m in items))


def _encode(history: History) -> Cold:
    last_id, size, used, packed = history.last_id, history.size, history.used, history.packed
    if not packed or len(packed) >= MAX_CHUNKS:
        return last_id, size, used, _rows(history.items)
    new = history.items[history.packed_count :]
    if not new:
        return last_id, size, used, *packed
    return last_id, size, used, *packed, _rows(new)


def _decode(cold: Cold) -> History:
    chunks: Chunks = cold[3:]
    if len(chunks) == 1:
        rows = marshal.loads(chunks[0])
    else:  # one chunk again: the rows as read, ~0.1 us a message
        rows = tuple(row for chunk in chunks for row in marshal.loads(chunk))
        chunks = (marshal.dumps(rows),)
    items = [(row[0], message_from_columns(*row[1:])) for row in rows]
    history = History(cold[0], items, cold[1], chunks)
    history.used = cold[2]
    return history


class HistoryCache:
    """Per session, its history: hot (objects) for the most recently used, else cold (bytes)."""

    def __init__(self, max_bytes: int = MAX_BYTES, hot_messages: int = HOT_MESSAGES) -> None:
        self.max_bytes = max_bytes
        self.hot_messages = hot_messages
        self._hot: OrderedDict[str, History] = OrderedDict()
        self._cold: OrderedDict[str, Cold] = OrderedDict()
        self._hot_count = 0  # messages in hot histories
        self._bytes = 0  # of all histories, as counted (see the module's docstring)
        self._freed = 0  # objects let go of since this cache last ran a young collection
        self._tick = 0  # `merge` calls: when each history was last used

    def last_id(self, session_id: str) -> int | None:
        """The last message id the session's cached history includes; None: not cached."""
        history = self._hot.get(session_id)
        if history is not None:
            return history.last_id
        cold = self._cold.get(session_id)
        return None if cold is None else cold[0]

    def __contains__(self, session_id: str) -> bool:
        return session_id in self._hot or session_id in self._cold

    def __len__(self) -> int:
        return len(self._hot) + len(self._cold)

    @property
    def size(self) -> int:
        return self._bytes

    def merge(self, session_id: str, rows: Iterable[IdRow], since: int | None) -> History | None:
        """Rows past the cached history's last id join it, in id order; the session becomes
        the most recently used. `since`: the id the rows were read after (0: all of them).
        A session not cached is cached only from all its rows; else None.

        A cold history read back stays hot only if the hot ones it would push out have all
        been unused for longer than it had (`_admits`); else it is used once and stays cold."""
        self._tick += 1
        history = self._hot.get(session_id)
        hot = True
        if history is not None:
            self._hot.move_to_end(session_id)
        else:
            cold = self._cold.pop(session_id, None)
            if cold is not None:
                history = _decode(cold)
                hot = self._admits(len(history.items), self._tick - history.used)
            elif since == 0:
                history = History(0, [])
            else:
                return None
            if hot:
                self._hot[session_id] = history  # its bytes are counted already (cold: the same)
                self._hot_count += len(history.items)
        history.used = self._tick
        count, size = len(history.items), history.size
        for row_id, item in rows:
            if row_id > history.last_id:
                history.items.append(item)
                history.size += _size(item[1])
                history.last_id = row_id
        if len(history.items) > HISTORY_TRIM_AT:
            del history.items[: len(history.items) - HISTORY_KEEP]
            history.size = sum(_size(m) for _, m in history.items)
            history.packed, history.packed_count = (), 0  # encoded afresh when it goes cold
        if hot:
            self._hot_count += len(history.items) - count
        else:
            self._cold[session_id] = _encode(history)  # the newest of the cold
        self._bytes += history.size - size
        if self._hot_count > self.hot_messages or self._bytes > self.max_bytes:
            self._bound()
        return history

    def _admits(self, count: int, unused_for: int) -> bool:
        """Whether a history read back (`count` messages, unused for `unused_for` merges) is to
        stay hot: only if the least recently used hot histories that would go cold to make room
        have each been unused for longer.

        Why not plain LRU: conversations taking turns one after another whose histories are
        more than `hot_messages` push each other out, so with LRU every turn read its history
        back (CPU per turn rose from 0.6 ms to 8-10 ms with 50 conversations of 1,000 turns,
        bench/sustained_bench.py). Admitted so, the hot ones stay hot and a share of the turns
        as large as the hot bound's of their histories finds them hot; a conversation that
        stopped stays hot only until one back sooner than it was unused needs the room."""
        room = self.hot_messages - self._hot_count - count
        hot = ((history.used, len(history.items)) for history in self._hot.values())
        return makes_room(room, hot, self._tick, unused_for)  # all would go: it stays hot

    def extend(self, session_id: str, rows: Sequence[IdRow], since: int) -> None:
        """Rows a session's own writes just added (and those others added since `since`), as
        `merge` takes them, without making its history hot: a cold history takes them as one
        more chunk of its bytes, not read back (a turn's appends come while other turns use
        the hot histories, and reading a long history back costs ~1 us a message)."""
        cold = self._cold.get(session_id)
        if cold is None:
            self.merge(session_id, rows, since)
            return
        last_id, size, used, packed = cold[0], cold[1], cold[2], cold[3:]
        new = [(row_id, item) for row_id, item in rows if row_id > last_id]
        if not new:
            return
        if len(packed) >= MAX_APPENDED_CHUNKS:
            self.merge(session_id, rows, since)  # read back, and encoded as one when it goes
            return
        added = sum(_size(m) for _, (_, m) in new)
        self._cold[session_id] = (
            new[-1][0],
            size + added,
            used,
            *packed,
            _rows([i for _, i in new]),
        )
        self._cold.move_to_end(session_id)
        self._bytes += added
        if self._bytes > self.max_bytes:
            self._bound()

    def _let_go(self, history: History) -> None:
        """A hot history's objects are freed, which CPython's young count takes for fewer young
        objects (see the module's docstring): past its threshold, the young collection it missed."""
        self._freed += ITEM_OBJECTS * len(history.items)
        young, middle, _ = gc.get_threshold()
        if self._freed > young:
            self._freed = 0
            if gc.isenabled():  # `bot serve` turns it on once started (bot/runtime/heap.py)
                # the middle generation with it when due, as CPython would (an explicit young
                # collection does not start one: the middle one would fill for as long)
                gc.collect(1 if gc.get_count()[1] > middle else 0)

    def forget(self, session_id: str) -> None:
        """Let the session's history go (its next load reads it from the database)."""
        history = self._hot.pop(session_id, None)
        if history is not None:
            self._hot_count -= len(history.items)
            self._bytes -= history.size
        cold = self._cold.pop(session_id, None)
        if cold is not None:
            self._bytes -= cold[1]

    def clear(self) -> None:
        self._hot.clear()
        self._cold.clear()
        self._hot_count = self._bytes = 0

    def _bound(self) -> None:
        """Past `hot_messages`, the least recently used hot histories go cold; past
        `max_bytes`, the least recently used go, cold ones first. The newest stays."""
        while self._hot_count > self.hot_messages and len(self._hot) > 1:
            session_id, history = self._hot.popitem(last=False)
            self._hot_count -= len(history.items)
            self._cold[session_id] = _encode(history)  # the newest of the cold
            self._let_go(history)
        while self._bytes > self.max_bytes and self._cold:
            self._bytes -= self._cold.popitem(last=False)[1][1]
        while self._bytes > self.max_bytes and len(self._hot) > 1:
            _, history = self._hot.popitem(last=False)
            self._hot_count -= len(history.items)
            self._bytes -= history.size
            self._let_go(history)
