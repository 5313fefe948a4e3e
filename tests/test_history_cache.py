"""The store's history cache (bot/storage/history_cache.py): the same history whether a session
is kept as objects or as bytes, a byte bound, least recently used out first."""

from __future__ import annotations

import gc

from agent.types import Message, ToolCall, Usage, message_of
from bot.runtime.heap import OLDER_THRESHOLDS, YOUNG_THRESHOLD
from bot.storage.history_cache import (
    ENTRY_BYTES,
    MAX_APPENDED_CHUNKS,
    MAX_CHUNKS,
    HistoryCache,
    IdRow,
)
from content.parts import BlobRef, ImagePart, parts_to_json

CALL = ToolCall("c1", "web_search", '{"q":  "Zürich"}')
IMAGE = ImagePart(BlobRef("b1", "image/png", 12, "a.png"))
MESSAGES = [
    Message("user", "What's the weather in Zürich? 🌦", parts=(IMAGE,)),
    Message("assistant", "", (CALL,), usage=Usage(10, 2, "openai", "m")),
    Message("tool", "12°C", tool_call_id="c1", name="web_search", is_error=True),
    Message("assistant", "It is 12°C and raining."),
]


def rows(first_id: int, turn_id: str, messages: list[Message]) -> list[IdRow]:
    return [(first_id + i, (turn_id, m)) for i, m in enumerate(messages)]


def stored(m: Message) -> Message:
    """What the database gives back: no usage (that is the `usage` table's)."""
    return Message(
        m.role, m.content, m.tool_calls, m.tool_call_id, m.name, m.is_error, None, m.parts
    )


def test_a_history_gone_cold_reads_back_the_same() -> None:
    cache = HistoryCache(hot_messages=4)
    first = cache.merge("s1", rows(1, "t1", MESSAGES), 0)
    assert first is not None and [m for _, m in first.items] == MESSAGES
    assert first.items[0][1] is MESSAGES[0]  # hot: the very objects (their derived forms kept)
    cache.merge("s2", rows(5, "t2", [Message("user", "other")]), 0)  # s1 goes cold
    assert cache.last_id("s1") == 4 and "s1" in cache
    again = cache.merge("s1", rows(6, "t3", [Message("user", "more")]), 4)
    assert again is not None
    expected = [("t1", stored(m)) for m in MESSAGES] + [("t3", Message("user", "more"))]
    assert again.items == expected
    assert [m.usage for _, m in again.items[:4]] == [None] * 4
    # s2 was used since s1 was: read back, s1 is used once and stays bytes; back again sooner
    # than s2 was used, it stays hot: the same objects from then on
    back = cache.merge("s1", (), 7)
    assert back is not None and back.items == expected and back.items[0][1] is not again.items[0][1]
    assert cache.merge("s1", (), 7).items[0][1] is back.items[0][1]  # type: ignore[union-attr]


def test_message_of_makes_what_the_dataclass_makes() -> None:
    """The cache's fast constructor (agent/types.py): every field, and a `derived` of its own."""
    for m in [*MESSAGES, Message("assistant", "x", usage=Usage(1, 2, "anthropic", "m"))]:
        fields = (m.role, m.content, m.tool_calls, m.tool_call_id, m.name, m.is_error, m.usage)
        made = message_of(*fields, m.parts)
        assert made == m and repr(made) == repr(m) and made.usage == m.usage
        assert made.derived == {} and made.derived is not message_of(*fields, m.parts).derived


def test_rows_already_included_are_not_added_again() -> None:
    cache = HistoryCache()
    cache.merge("s", rows(1, "t1", MESSAGES[:2]), 0)
    history = cache.merge("s", rows(2, "t1", MESSAGES[1:3]), 1)  # row 2 again, then row 3
    assert history is not None and [m for _, m in history.items] == MESSAGES[:3]
    assert history.last_id == 3


def test_a_session_not_cached_is_cached_only_from_all_its_rows() -> None:
    cache = HistoryCache()
    assert cache.merge("s", rows(9, "t9", MESSAGES[:1]), 8) is None  # a part of it: not cached
    assert "s" not in cache and cache.last_id("s") is None
    assert cache.merge("s", (), 0) is not None and cache.last_id("s") == 0
    cache.forget("s")
    assert "s" not in cache and cache.size == 0


def test_the_byte_bound_evicts_the_least_recently_used() -> None:
    one = len("x" * 100) + ENTRY_BYTES
    cache = HistoryCache(max_bytes=3 * one, hot_messages=1)
    for n in range(3):
        cache.merge(f"s{n}", rows(n + 1, "t", [Message("user", "x" * 100)]), 0)
    assert len(cache) == 3 and cache.size == 3 * one
    cache.merge("s0", (), 1)  # used again: s1 is now the least recently used
    cache.merge("s3", rows(4, "t", [Message("user", "x" * 100)]), 0)
    assert "s1" not in cache and all(f"s{n}" in cache for n in (0, 2, 3))
    assert cache.size <= cache.max_bytes
    # one history past the bound alone: the newest stays, every other goes
    big = [Message("user", "y" * 400)]
    assert cache.merge("s4", rows(5, "t", big), 0) is not None
    assert len(cache) == 1 and "s4" in cache


def test_only_the_most_recent_histories_are_kept_as_objects() -> None:
    cache = HistoryCache(hot_messages=3)
    kept = [[Message("user", f"q{n}"), Message("assistant", f"a{n}")] for n in range(5)]
    for n, messages in enumerate(kept):
        cache.merge(f"s{n}", rows(10 * n + 1, "t", messages), 0)
    newest = cache.merge("s4", (), 12)
    assert newest is not None and newest.items[0][1] is kept[4][0]  # hot: the same objects
    older = cache.merge("s3", (), 32)  # went cold when s4 came: read back from its bytes
    assert older is not None and [m for _, m in older.items] == kept[3]
    assert older.items[0][1] is not kept[3][0]


def hot_turns(cache: HistoryCache, order: list[str], last: dict[str, Message]) -> int:
    """Merge each session of `order` in turn; how many found their history hot (the objects
    of their last merge)."""
    hits = 0
    for session_id in order:
        history = cache.merge(session_id, (), cache.last_id(session_id))
        assert history is not None
        hits += history.items[0][1] is last.get(session_id)
        last[session_id] = history.items[0][1]
    return hits


def test_conversations_taking_turns_past_the_hot_bound_find_a_share_hot() -> None:
    """Round robin over more history than `hot_messages`: with least recently used out first
    every turn pushed out the next one's history; the hot ones now stay hot."""
    cache = HistoryCache(hot_messages=10)
    sessions = [f"s{n}" for n in range(4)]  # 4 of 4 messages: 16
    for n, session_id in enumerate(sessions):
        cache.merge(session_id, rows(10 * n + 1, "t", MESSAGES), 0)
    last: dict[str, Message] = {}
    hot_turns(cache, sessions * 2, last)
    hits = hot_turns(cache, sessions * 10, last)
    assert hits == 20  # the two that fit, on each of their turns


def test_a_conversation_that_stopped_gives_way_to_one_that_came_back() -> None:
    cache = HistoryCache(hot_messages=4)
    for n, session_id in enumerate(("a", "b", "c")):  # a goes cold as c comes
        cache.merge(session_id, rows(10 * n + 1, "t", MESSAGES[:2]), 0)
    last: dict[str, Message] = {}
    hot_turns(cache, ["b", "c"] * 3, last)
    assert hot_turns(cache, ["a"], last) == 0  # b and c were used since: a is used once
    hits = hot_turns(cache, ["c", "a"] * 4, last)  # b stopped: a takes its place
    assert hits >= 6 and "b" in cache
    assert hot_turns(cache, ["b"], last) == 0  # b's objects went: it was read back


def test_cold_histories_keep_nothing_the_collector_walks() -> None:
    cache = HistoryCache(hot_messages=2)
    gc.collect()
    before = len(gc.get_objects())
    for n in range(500):
        answer = Message("assistant", f"a{n}", usage=Usage(1, 2, "openai", "m"))
        cache.merge(f"s{n}", rows(2 * n + 1, "t", [Message("user", f"q{n}"), answer]), 0)
    gc.collect()
    # 500 sessions, 1,000 messages: as objects ~2,500 tracked; as bytes, the newest's few
    assert len(gc.get_objects()) - before < 20
    assert len(cache) == 500


def test_a_history_back_and_forth_many_times_reads_back_whole() -> None:
    """Each time it goes cold again only its new messages are encoded (one more chunk)."""
    cache = HistoryCache(hot_messages=1)
    expected: list[tuple[str, Message]] = []
    next_id = 1
    for n in range(2 * MAX_CHUNKS + 3):  # past MAX_CHUNKS: encoded as one again
        added = [Message("user", f"q{n}"), Message("assistant", f"a{n}", (CALL,))]
        history = cache.merge("s", rows(next_id, f"t{n}", added), next_id - 1)
        assert history is not None and history.items == expected + [(f"t{n}", m) for m in added]
        expected = history.items[:]
        next_id += 2
        cache.merge(f"other{n}", (), 0)  # s goes cold
    back = cache.merge("s", (), next_id - 1)
    assert back is not None and back.items == expected and len(expected) == 2 * (2 * MAX_CHUNKS + 3)


def test_hot_histories_let_go_bring_the_young_collections_the_count_misses() -> None:
    """New histories made hot while older ones are let go of leave CPython's young count (made
    minus freed) where it was, so its own collections stop coming while the young generation
    fills; the cache runs them. Without it this churn brings none at all."""
    cache = HistoryCache(hot_messages=200)
    generations: list[int] = []

    def probe(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            generations.append(info["generation"])

    young, middle, old = gc.get_threshold()
    was_enabled = gc.isenabled()
    gc.collect()
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)  # what `bot serve` sets
    gc.callbacks.append(probe)
    gc.enable()
    try:
        for n in range(400):  # 20,000 messages made hot, 19,800 let go of
            messages = [Message("user" if i % 2 else "assistant", f"{n}.{i}") for i in range(50)]
            cache.merge(f"s{n}", rows(1, "t", messages), 0)
            del messages
    finally:
        gc.callbacks.remove(probe)
        gc.set_threshold(young, middle, old)
        if not was_enabled:
            gc.disable()
    # 39,600 objects let go of: one collection for each YOUNG_THRESHOLD (CPython may add a few)
    expected = 39_600 // YOUNG_THRESHOLD
    assert expected * 3 // 4 <= len(generations) <= expected * 2, generations
    assert 1 in generations  # the middle generation too, when due: it would fill as long


def test_an_append_to_a_cold_history_does_not_read_it_back() -> None:
    """A turn's writes join a history that went cold as more bytes; it reads back whole."""
    cache = HistoryCache(hot_messages=2)
    cache.merge("s", rows(1, "t1", MESSAGES), 0)
    cache.merge("other", rows(100, "t", [Message("user", "x")]), 0)  # s goes cold
    expected = [("t1", stored(m)) for m in MESSAGES]
    next_id = 5
    for n in range(MAX_APPENDED_CHUNKS + 3):  # past the chunk bound: read back, and cold again
        added = [Message("user", f"q{n}"), Message("assistant", f"a{n}")]
        cache.extend("s", rows(next_id, f"t{n}", added), next_id - 1)
        expected += [(f"t{n}", m) for m in added]
        next_id += 2
        assert cache.last_id("s") == next_id - 1
        assert "s" not in cache._hot or n == MAX_APPENDED_CHUNKS - 1  # read back at the bound
        cache.merge("other", (), 100)  # the other session is the one in use
    assert cache.size == sum(len(m.content) + ENTRY_BYTES for _, m in expected) + sum(
        len(c.id) + len(c.name) + len(c.arguments) + ENTRY_BYTES for c in [CALL]
    ) + len("x") + ENTRY_BYTES + len(parts_to_json(MESSAGES[0].parts) or "")
    back = cache.merge("s", (), next_id - 1)
    assert back is not None and back.items == expected


def test_an_append_to_a_hot_history_joins_its_objects() -> None:
    cache = HistoryCache()
    cache.merge("s", rows(1, "t1", MESSAGES[:1]), 0)
    cache.extend("s", rows(2, "t1", MESSAGES[1:]), 1)
    history = cache.merge("s", (), 4)
    assert history is not None and [m for _, m in history.items] == MESSAGES
    assert history.items[3][1] is MESSAGES[3]
