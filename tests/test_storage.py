"""SqliteStore: migrations, WAL and checkpoints, sessions, history and its cache, audit, turns, usage."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from pathlib import Path

import pytest
from sqlite_utils import Database

from agent.types import AuditRecord, Message, ToolCall
from bot.storage import AUDIT_RESULT_LIMIT, MIGRATIONS, SqliteStore, migrate

KEY = {"channel": "websocket", "conversation_key": "chat-1", "user_id": "user-1"}

CONVERSATION = [
    ("t1", Message("user", "What's the weather in Zürich? 🌦")),
    (
        "t1",
        Message(
            "assistant",
            "",
            (
                ToolCall("call_1", "web_search", '{"query": "Zürich weather"}'),
                ToolCall("call_2", "get_current_datetime", "{}"),
            ),
        ),
    ),
    ("t1", Message("tool", "12°C, rain", tool_call_id="call_1", name="web_search")),
    (
        "t1",
        Message(
            "tool",
            "clock unavailable",
            tool_call_id="call_2",
            name="get_current_datetime",
            is_error=True,
        ),
    ),
    ("t1", Message("assistant", "It is 12°C and raining.")),
    ("t2", Message("user", "")),
]


async def append_all(store: SqliteStore, session_id: str, items: list[tuple[str, Message]]) -> None:
    for turn_id in dict.fromkeys(turn for turn, _ in items):
        await store.append_messages(session_id, turn_id, [m for t, m in items if t == turn_id])


def versions(path: Path) -> list[int]:
    with Database(path) as db:
        return [row["version"] for row in db.query("SELECT version FROM schema_migrations")]


async def test_fresh_database_gets_every_migration(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "bot.db"
    async with SqliteStore(path):
        pass
    assert versions(path) == list(range(1, len(MIGRATIONS) + 1))
    with Database(path) as db:
        assert {"chat_sessions", "messages", "audit_logs", "turns", "memories", "usage"} <= set(
            db.table_names()
        )
        assert "idx_session_key" in {index.name for index in db["chat_sessions"].indexes}


async def test_reopening_a_migrated_database_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "bot.db"
    async with SqliteStore(path) as store:
        session_id = await store.active_session(**KEY)
    with Database(path) as db:
        before = list(db.query("SELECT * FROM schema_migrations"))
        assert migrate(db) == []
    async with SqliteStore(path) as store:
        assert await store.active_session(**KEY) == session_id
    with Database(path) as db:
        assert list(db.query("SELECT * FROM schema_migrations")) == before


async def test_a_v1_database_gains_the_later_columns_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with Database(path) as db:
        assert migrate(db, target=1) == [1]
        assert "title" not in db["chat_sessions"].columns_dict
        db["chat_sessions"].insert(
            {
                "id": "s-old",
                "agent_id": "default",
                "channel": "telegram",
                "conversation_key": "42",
                "user_id": "7",
                "status": "active",
            }
        )
    async with SqliteStore(path) as store:
        session = await store.get_session("s-old")
        assert session is not None and session.title is None
        await store.record_tool_call(
            AuditRecord("s-old", "t", "c", "tool", "{}", "r", True, 1.0, extra={"attempt": 2})
        )
        assert (await store.audit_for_session("s-old"))[0].extra == '{"attempt": 2}'
    assert versions(path) == list(range(1, len(MIGRATIONS) + 1))


async def test_a_database_newer_than_the_code_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    async with SqliteStore(path):
        pass
    with Database(path) as db:
        db["schema_migrations"].insert({"version": 99, "applied_at": "later"})
    with pytest.raises(RuntimeError, match="schema v99 is newer"):
        await SqliteStore(path).open()


async def test_wal_is_on_with_normal_sync(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "bot.db") as store:
        with contextlib.closing(sqlite3.connect(tmp_path / "bot.db")) as other:
            assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        # synchronous is per connection, so ask the store's own (NORMAL is 1)
        synchronous = await store._run(lambda: store._conn.execute("PRAGMA synchronous").fetchone())
        assert synchronous == (1,)


async def test_sessions_are_found_per_key_and_closed_by_new(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "bot.db") as store:
        first = await store.active_session(**KEY, persona_version="v1")
        assert await store.active_session(**KEY) == first
        assert await store.active_session(**{**KEY, "user_id": "user-2"}) != first
        assert await store.active_session(**KEY, agent_id="specialist-research") != first
        session = await store.get_session(first)
        assert session is not None
        assert (session.agent_id, session.status, session.persona_version) == (
            "default",
            "active",
            "v1",
        )

        await store.close_session(first)
        second = await store.active_session(**KEY)
        assert second != first
        closed = await store.get_session(first)
        assert closed is not None and closed.status == "closed"

        child = await store.create_session(
            agent_id="specialist-research", parent_session_id=second, **KEY
        )
        await store.set_session_status(child, "completed")
        assert [(c.id, c.status) for c in await store.child_sessions(second)] == [
            (child, "completed")
        ]
        assert await store.get_session("nope") is None
        with pytest.raises(ValueError, match="'paused'"):
            await store.set_session_status(child, "paused")
        with pytest.raises(LookupError, match="'nope'"):
            await store.close_session("nope")


async def test_history_round_trips_exactly(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "bot.db") as store:
        session_id = await store.active_session(**KEY)
        await append_all(store, session_id, CONVERSATION)
        assert await store.load_history(session_id) == CONVERSATION
        rows = await store.messages_for_session(session_id)
        assert [row.is_error for row in rows] == [0, 0, 0, 1, 0, 0]
    async with SqliteStore(tmp_path / "bot.db") as reopened:
        assert await reopened.load_history(session_id) == CONVERSATION


# room for about two of these sessions' histories, one of them as objects
SMALL_CACHE = {"history_cache_bytes": 400, "history_hot_messages": 2}


async def test_history_cache_stays_consistent(tmp_path: Path) -> None:
    path = tmp_path / "bot.db"
    async with SqliteStore(path, **SMALL_CACHE) as store, SqliteStore(path) as other:
        sessions = [await store.active_session(**{**KEY, "user_id": f"u{i}"}) for i in range(3)]
        for session_id in sessions:
            await store.load_history(session_id)
        for n, (turn_id, message) in enumerate(CONVERSATION):
            await store.append_messages(sessions[n % 3], turn_id, [message])
        history = await store.load_history(sessions[0])
        history.append(("mine", Message("user", "callers may not change the cache")))
        # `other` shares the file, like a second gateway process: the cache must see its rows
        await other.append_messages(sessions[0], "t9", [Message("user", "from elsewhere")])
        await store.append_messages(sessions[0], "t10", [Message("user", "back here")])
        for n, session_id in enumerate(sessions):
            expected = CONVERSATION[n::3]
            if n == 0:
                expected += [
                    ("t9", Message("user", "from elsewhere")),
                    ("t10", Message("user", "back here")),
                ]
            assert await store.load_history(session_id) == expected
            assert await other.load_history(session_id) == expected


async def test_audit_truncates_long_results_with_a_marker(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "bot.db") as store:
        args = '{"query":  "spaces kept"}'
        await store.record_tool_call(
            AuditRecord("s", "t", "c1", "web_search", args, "x" * 10_000, False, 12.5)
        )
        await store.record_tool_call(
            AuditRecord("s", None, "c2", "clock", "{}", "short", True, 0.1)
        )
        long, short = await store.audit_for_session("s")
        assert long.arguments == args and long.ok == 0 and long.duration_ms == 12.5
        assert long.result is not None and len(long.result) == AUDIT_RESULT_LIMIT
        assert long.result.startswith("x" * 3000)
        assert long.result.endswith("[truncated: 10000 chars in all]")
        assert (short.result, short.ok, short.turn_id, short.extra) == (
            "short",
            1,
            None,
            None,
        )


async def test_turns_are_created_updated_and_finished(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "bot.db") as store:
        session_id = await store.active_session(**KEY)
        await store.create_turn(
            turn_id="turn-1",
            session_id=session_id,
            channel="websocket",
            conversation_key="chat-1",
            inbound_event_ids=["e1", "e2"],
            placeholder=None,
        )
        turn = await store.get_turn("turn-1")
        assert turn is not None
        assert (turn.status, turn.placeholder, turn.inbound_event_ids) == (
            "running",
            None,
            ("e1", "e2"),
        )
        handle = {"chat": {"chat_id": "chat-1", "thread_id": None}, "message_id": "m1", "data": {}}
        await store.update_turn_placeholder("turn-1", handle)
        await store.finish_turn("turn-1", status="completed", final_text="done")
        turn = await store.get_turn("turn-1")
        assert turn is not None and turn.finished_at is not None
        assert (turn.placeholder, turn.status, turn.final_text, turn.error) == (
            handle,
            "completed",
            "done",
            None,
        )
        assert turn.finished_at >= turn.created_at
        assert await store.get_turn("turn-2") is None
        with pytest.raises(LookupError, match="'turn-2'"):
            await store.finish_turn("turn-2", status="failed", error="boom")
        with pytest.raises(ValueError, match="'done'"):
            await store.finish_turn("turn-1", status="done")


async def test_usage_is_recorded(tmp_path: Path) -> None:
    async with SqliteStore(":memory:") as store:
        await store.record_usage(
            session_id="s",
            turn_id="t",
            provider="offline",
            model="echo",
            input_tokens=12,
            output_tokens=3,
        )
        [row] = await store.usage_for_session("s")
        assert (row.provider, row.model, row.input_tokens, row.output_tokens) == (
            "offline",
            "echo",
            12,
            3,
        )


async def test_concurrent_appends_land_in_order_per_session(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "bot.db") as store:
        sessions = [await store.active_session(**{**KEY, "user_id": f"u{i}"}) for i in range(4)]
        await store.load_history(sessions[0])  # one cached, three not
        await asyncio.gather(
            *(
                store.append_messages(sessions[n % 4], f"t{n}", [Message("user", str(n))])
                for n in range(200)
            )
        )
    async with SqliteStore(tmp_path / "bot.db") as reopened:
        for i, session_id in enumerate(sessions):
            expected = [(f"t{n}", Message("user", str(n))) for n in range(i, 200, 4)]
            assert await reopened.load_history(session_id) == expected


async def test_a_failing_call_fails_alone_among_queued_calls(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "bot.db") as store:
        session_id = await store.active_session(**KEY)
        calls = [
            store.append_messages(session_id, f"t{n}", [Message("user", str(n))]) for n in range(5)
        ]
        calls.insert(2, store.finish_turn("no-such-turn", status="failed"))
        results = await asyncio.gather(*calls, return_exceptions=True)
        assert [type(r).__name__ for r in results] == ["NoneType"] * 2 + ["LookupError"] + [
            "NoneType"
        ] * 3
        assert [m.content for _, m in await store.load_history(session_id)] == list("01234")


async def test_a_cancelled_caller_still_gets_its_write(tmp_path: Path) -> None:
    async with SqliteStore(":memory:") as store:
        session_id = await store.active_session(**KEY)
        task = asyncio.create_task(store.append_messages(session_id, "t", [Message("user", "hi")]))
        await asyncio.sleep(0)  # the task starts, and its write lands before it can be cancelled
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert await store.load_history(session_id) == [("t", Message("user", "hi"))]


async def test_checkpoints_run_on_their_own_thread_and_the_wal_is_tidied(tmp_path: Path) -> None:
    from bot.storage.connection import CHECKPOINT_EVERY

    store = SqliteStore(tmp_path / "bot.db")
    with pytest.raises(RuntimeError, match="not open"):
        await store.active_session(**KEY)
    async with store:
        session_id = await store.active_session(**KEY)
        assert store._conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        for n in range(CHECKPOINT_EVERY + 5):
            await store.append_messages(session_id, f"t{n}", [Message("user", str(n))])
        assert store._checkpoint is not None
        await asyncio.wrap_future(store._checkpoint)
        assert store.checkpoints == 1
    wal = tmp_path / "bot.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0  # checkpointed and emptied on close
    async with SqliteStore(tmp_path / "bot.db") as reopened:
        assert len(await reopened.load_history(session_id)) == CHECKPOINT_EVERY + 5
    with pytest.raises(RuntimeError, match="not open"):
        await store.load_history("s")


async def test_the_wal_starts_over_under_writes_that_never_pause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PASSIVE checkpoint copies only what was written before it began, and a WAL starts
    over only when a write finds all of it copied: with writes all through each checkpoint it
    never did, and grew by every page written. A checkpoint that leaves more than
    RESTART_AT_FRAMES behind is followed by a RESTART, during which calls wait off the loop."""
    from bot.storage import connection

    monkeypatch.setattr(connection, "RESTART_AT_FRAMES", 64)
    writes = 12 * connection.CHECKPOINT_EVERY
    async with SqliteStore(tmp_path / "bot.db") as store:
        session_id = await store.active_session(**KEY)
        page = store._conn.execute("PRAGMA page_size").fetchone()[0]
        text = "x" * page  # a message of a page or more: at least one new page each write
        for n in range(writes):
            await store.append_messages(session_id, f"t{n}", [Message("user", text)])
            if n % 50 == 0:  # a serving loop runs other callbacks between turns; a RESTART
                await asyncio.sleep(0)  # waits for one (else it gives up after a second)
        assert store._checkpoint is not None
        await asyncio.wrap_future(store._checkpoint)
        assert store.restarts >= 1
        wal = (tmp_path / "bot.db-wal").stat().st_size
        # each write adds two pages or more (its row's and its text's): all of them without a
        # restart; with one, what came since the last (a checkpoint comes every 500 writes)
        assert wal < writes * page
        history = await store.load_history(session_id)
        assert len(history) == writes


async def test_a_reader_holding_on_defers_the_restart_and_no_write_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process's long read keeps the frames it may need: the RESTART waits for it only
    RESTART_WAIT_S (holding the write lock meanwhile, so the writes wait off the loop), gives
    up, and starts the WAL over at a later checkpoint, once the reader is gone."""
    from bot.storage import connection

    monkeypatch.setattr(connection, "RESTART_AT_FRAMES", 64)
    async with SqliteStore(tmp_path / "bot.db") as store:
        store.busy_wait_s = 2.0  # a RESTART waiting out the reader (5 s, say) would fail writes
        session_id = await store.active_session(**KEY)
        reader = sqlite3.connect(tmp_path / "bot.db")
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM messages").fetchone() == (0,)
        written = 0
        for _ in range(2):
            for _ in range(connection.CHECKPOINT_EVERY):
                await store.append_messages(session_id, "t", [Message("user", str(written))])
                written += 1
            assert store._checkpoint is not None
            while not store._checkpoint.done():  # writes all through the checkpoint
                await store.append_messages(session_id, "t", [Message("user", str(written))])
                written += 1
            assert store._checkpoint.result() is None and store.restarts == 0
        reader.rollback()
        reader.close()
        for _ in range(connection.CHECKPOINT_EVERY):
            await store.append_messages(session_id, "t", [Message("user", str(written))])
            written += 1
        assert store._checkpoint is not None
        await asyncio.wrap_future(store._checkpoint)
        assert store.restarts == 1
        history = await store.load_history(session_id)
        assert [m.content for _, m in history] == [str(n) for n in range(written)]


async def test_writes_during_a_restart_wait_for_it_on_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the checkpoint thread's RESTART holds the write lock (here waiting out a reader for
    RESTART_WAIT_S), the loop's writes wait for it and then run on the loop, in order: handed
    to a thread, they waited for the GIL behind the busy loop."""
    from bot.storage import connection

    monkeypatch.setattr(connection, "RESTART_AT_FRAMES", 64)
    threads: set[int] = set()
    async with SqliteStore(tmp_path / "bot.db") as store:
        store._conn.set_trace_callback(lambda _: threads.add(threading.get_ident()))
        session_id = await store.active_session(**KEY)
        reader = sqlite3.connect(tmp_path / "bot.db")
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM messages").fetchone() == (0,)
        written = 0
        for _ in range(connection.CHECKPOINT_EVERY):
            await store.append_messages(session_id, "t", [Message("user", str(written))])
            written += 1
        assert store._checkpoint is not None
        during = 0
        while not store._checkpoint.done():  # writes all through the checkpoint and its RESTART
            tasks = [
                store.append_messages(session_id, "t", [Message("user", str(written + n))])
                for n in range(5)
            ]
            await asyncio.gather(*tasks)
            written += 5
            during += 5
        reader.rollback()
        reader.close()
        assert store._checkpoint.result() is None and during > 5
        history = await store.load_history(session_id)
    assert [m.content for _, m in history] == [str(n) for n in range(written)]
    assert threads == {threading.get_ident()}  # every statement on the loop's thread


def _wal_starts(wal: Path) -> int:
    """The WAL header's checkpoint sequence: one more each time the WAL starts over."""
    return int.from_bytes(wal.read_bytes()[12:16], "big")


async def test_the_checkpoint_thread_starts_the_wal_over_not_the_next_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write that starts a WAL over syncs it (SQLite with synchronous=NORMAL): made on the
    checkpoint thread right after its RESTART, not by the loop's next write."""
    from bot.storage import connection

    monkeypatch.setattr(connection, "RESTART_AT_FRAMES", 8)
    async with SqliteStore(tmp_path / "bot.db") as store:
        session_id = await store.active_session(**KEY)
        for n in range(20):
            await store.append_messages(session_id, f"t{n}", [Message("user", str(n))])
        wal = tmp_path / "bot.db-wal"
        before = _wal_starts(wal)
        store._request_checkpoint()
        assert store._checkpoint is not None
        await asyncio.wrap_future(store._checkpoint)
        assert store.restarts == 1
        assert _wal_starts(wal) == before + 1  # started over, and no write of ours since
        await store.append_messages(session_id, "t20", [Message("user", "20")])
        assert _wal_starts(wal) == before + 1
        history = await store.load_history(session_id)
    assert [m.content for _, m in history] == [str(n) for n in range(21)]
    async with SqliteStore(tmp_path / "bot.db") as again:  # what the WAL held is all there
        reread = await again.load_history(session_id)
    assert [m.content for _, m in reread] == [str(n) for n in range(21)]


async def test_a_very_long_history_is_trimmed_to_the_newest_messages(tmp_path: Path) -> None:
    from bot.storage.history_cache import HISTORY_KEEP, HISTORY_TRIM_AT

    async with SqliteStore(tmp_path / "bot.db") as store:
        session_id = await store.active_session(**KEY)
        await store.append_messages(
            session_id, "t0", [Message("user", str(n)) for n in range(HISTORY_TRIM_AT + 1)]
        )
        history = await store.load_history(session_id)
        assert len(history) == HISTORY_KEEP
        assert history[-1][1].content == str(HISTORY_TRIM_AT)
