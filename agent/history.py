"""Fit a session's history into the context budget: oldest turns go first, a turn goes whole."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence

from agent.types import Message
from content.parts import ImagePart, Part, describe

Rows = Sequence[tuple[str, Message]]  # (turn id, message), oldest first
# Anthropic: (width * height) / 750 tokens, a 1568 px long edge at most (~1,600); OpenAI's high
# detail comes out close to it for the same size
IMAGE_TOKENS = 1600
# messages the windows keep in all, as many as the store's history cache keeps as objects
# (HOT_MESSAGES): fewer, and 50 conversations of 1,000 turns built their windows again each
# turn (80 us a turn; bench/sustained_bench.py). Mostly the cache's own objects, frozen once old
# (bot/runtime/heap.py), so the collector walks them about twice
KEPT_MESSAGES = 128000


def estimate_tokens(message: Message) -> int:
    """A cheap estimate (about four characters a token), made once per message: a window that
    starts over (a trimmed history cache) measures thousands of messages again."""
    tokens: int | None = message.derived.get("tokens")
    if tokens is None:
        tokens = message.derived["tokens"] = _estimate(message)
    return tokens


def _estimate(message: Message) -> int:
    # no tokenizer on the hot path
    size = len(message.content) + 16
    for call in message.tool_calls:
        size += len(call.name) + len(call.arguments) + 16
    media = sum(_media_tokens(part) for part in message.parts) if message.parts else 0
    return size // 4 + 1 + media


def _media_tokens(part: Part) -> int:
    """What a part costs a model that takes it: an image about as much as the vendors charge for
    one scaled to their limit; anything else at least its description (a text-only model reads
    that), a document far more once encoders send its pages (their estimate then belongs here)."""
    if isinstance(part, ImagePart):
        return IMAGE_TOKENS
    return len(describe(part)) // 4 + 1


class HistoryWindow:
    """Per session, where the kept history starts and what it costs, updated as turns append.

    Sessions only grow (a new session starts empty), so each turn measures just the messages
    added since the last one and drops whole turns from the front while over budget: the cost
    per turn stays flat however long the conversation gets. Dropping the oldest turns until the
    rest fits keeps exactly the newest whole turns that fit.

    The kept messages of the newest sessions are kept too (`max_kept` messages in all; whose,
    when more are talking: `_keeps`; one session's whatever their number), and extended by the
    new rows, when the store hands out the same message objects as last time (the store's
    history cache does for the sessions it keeps as objects): building them again walked the
    whole window in Python on every turn, a tenth of the gateway's CPU per turn at 2,000
    messages. Only that many: they hold their messages alive, where the collector walks them
    (bot/storage/history_cache.py).
    """

    def __init__(self, max_sessions: int = 4096, max_kept: int = KEPT_MESSAGES) -> None:
        self.max_sessions = max_sessions
        self.max_kept = max_kept
        # seen, start, used, and when it was last fitted (`_tick`)
        self._state: OrderedDict[str, tuple[int, int, int, int]] = OrderedDict()
        # session -> the calls of the last step still without a result, and the rows (indices)
        # that are results of no open call: what `_strays` found in the rows measured so far
        self._calls: dict[str, tuple[set[str], list[int]]] = {}
        # session -> (the last message measured, the messages from `start` up to it)
        self._kept: OrderedDict[str, tuple[Message, list[Message], int]] = OrderedDict()
        self._kept_count = 0  # messages in `_kept`
        self._tick = 0  # `fit` calls

    def fit(self, session_id: str, rows: Rows, budget_tokens: int) -> list[Message]:
        self._tick += 1
        seen, start, used, fitted = self._state.pop(session_id, (0, 0, 0, self._tick))
        if seen > len(rows):  # not the history we measured: start over
            seen, start, used = 0, 0, 0
        new = rows[seen:]
        waiting, strays = self._calls.pop(session_id, (set(), [])) if seen else (set(), [])
        waiting = _strays(new, seen, waiting, strays)
        was_start = start
        used += sum(estimate_tokens(message) for _, message in new)
        while used > budget_tokens and start < len(rows):
            turn_id = rows[start][0]
            while start < len(rows) and rows[start][0] == turn_id:
                used -= estimate_tokens(rows[start][1])
                start += 1
        self._state[session_id] = (len(rows), start, used, self._tick)
        strays = [index for index in strays if index >= start]
        if waiting or strays:  # most sessions have neither: nothing kept (nothing for the GC)
            self._calls[session_id] = (waiting, strays)
        if len(self._state) > self.max_sessions:
            gone, _ = self._state.popitem(last=False)
            self._calls.pop(gone, None)
        known = self._kept.pop(session_id, None)
        if known is not None:
            self._kept_count -= len(known[1])
        if known is not None and seen and rows[seen - 1][1] is known[0]:
            kept = known[1]  # the messages rows[was_start:seen]: add the new, drop the old
            kept.extend(message for _, message in new)
            del kept[: start - was_start]
        else:
            kept = [message for _, message in rows[start:]]
        if rows and self._keeps(len(kept), self._tick - fitted):
            self._kept[session_id] = (rows[-1][1], kept, self._tick)
            self._kept_count += len(kept)
            while self._kept_count > self.max_kept and len(self._kept) > 1:
                self._kept_count -= len(self._kept.popitem(last=False)[1][1])
        # A history that starts mid-exchange (a stray tool result) would be rejected by the APIs.
        first_user = next(
            (i for i, message in enumerate(kept) if message.role == "user"), len(kept)
        )
        if strays:  # rare (see `_strays`): only then a copy of the window
            skip = {index - start for index in strays}
            return [m for i, m in enumerate(kept) if i >= first_user and i not in skip]
        return kept[first_user:]

    def _keeps(self, count: int, unused_for: int) -> bool:
        """Whether a window of `count` messages, its session fitted `unused_for` fits ago (0: new
        here), is kept: only if the least recently fitted windows that would go to make room
        were each unused for longer (the store's history cache keeps its histories so, for
        the same reason: conversations taking turns past the bound pushed each other's
        windows out every turn, and each turn built its window again, ~0.8 ms at 2,400
        messages; bench/sustained_bench.py --turns 1600)."""
        room = self.max_kept - self._kept_count - count
        kept = ((fitted, len(messages)) for _, messages, fitted in self._kept.values())
        return makes_room(room, kept, self._tick, unused_for)


def makes_room(room: int, kept: Iterable[tuple[int, int]], now: int, unused_for: int) -> bool:
    """Whether a newcomer, unused for `unused_for` ticks, is to be kept where `room` is what is
    left once it is (below 0: too little): only if the kept ones that would go to make room,
    least recently used first (`kept`: when each was last used, its size), were each unused
    for longer. A kept one that stopped gives way once one back sooner needs the room; under a
    cyclic load past the bound the kept ones stay kept (least recently used out first, each
    newcomer pushed out the next one due). All would go: the newcomer is kept."""
    for used, size in kept:
        if room >= 0:
            return True
        if now - used <= unused_for:
            return False
        room += size
    return True


def _strays(new: Rows, seen: int, waiting: set[str], strays: list[int]) -> set[str]:
    """Walk the rows not measured yet (`new`, from index `seen`): adds to `strays` the index of each tool
    result whose call is not open (answered already, or not of the step before it), and returns
    the calls still open after the last row.

    The vendors refuse a history with a `tool_use` id that has two results. A process that stalled
    past its lease could write a second one (agent/fence.py stops that, but a write already under
    way when the lease ran out may land); such a row is left out of every request, and finding it
    costs a look at each new row, once.
    """
    for index, (_, message) in enumerate(new, seen):
        if message.role == "tool":
            if message.tool_call_id in waiting:
                waiting.discard(message.tool_call_id or "")
            else:
                strays.append(index)
        elif message.tool_calls or waiting:
            waiting = {call.id for call in message.tool_calls}
    return waiting


def fit_history(rows: Rows, budget_tokens: int) -> list[Message]:
    """The newest whole turns whose messages fit `budget_tokens` (no state kept)."""
    return HistoryWindow().fit("", rows, budget_tokens)
