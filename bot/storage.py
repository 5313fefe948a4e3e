"""SqliteStore: sessions, messages, audit, turns and usage in SQLite (WAL), all off the loop."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
import threading
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar, cast

from sqlite_utils import Database

from agent.types import AuditRecord, Message, Role, ToolCall

log = logging.getLogger(__name__)

T = TypeVar("T")
HistoryItem = tuple[str, Message]
SessionKey = tuple[str, str, str, str]  # channel, conversation_key, user_id, agent_id

SESSION_STATUSES = frozenset(
    {"active", "closed", "running", "completed", "failed", "killed", "timeout"}
)
TURN_STATUSES = frozenset({"running", "completed", "failed", "stopped"})
AUDIT_RESULT_LIMIT = 4000


def _insert_sql(table: str, columns: str) -> str:
    names = columns.split()
    return f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"


_INSERT_SESSION = _insert_sql(
    "chat_sessions",
    "id channel conversation_key user_id agent_id parent_session_id status persona_version"
    " created_at updated_at",
)
_INSERT_MESSAGE = _insert_sql(
    "messages",
    "session_id turn_id role content tool_calls tool_call_id name is_error tokens_in tokens_out"
    " created_at",
)
_INSERT_AUDIT = _insert_sql(
    "audit_logs",
    "session_id turn_id call_id tool_name arguments result ok duration_ms extra created_at",
)
_INSERT_USAGE = _insert_sql(
    "usage", "session_id turn_id provider model input_tokens output_tokens created_at"
)
_ORDER_COLUMNS = [
    "id",
    "tenant",
    "user_id",
    "session_id",
    "service",
    "category",
    "method",
    "amount",
    "currency",
    "status",
    "payment_url",
    "created_at",
    "expires_at",
]
_INSERT_ORDER = _insert_sql("orders", " ".join(_ORDER_COLUMNS))
_INSERT_TURN = _insert_sql(
    "turns",
    "id session_id channel conversation_key inbound_event_ids placeholder status created_at",
)
# rowid order is creation order, and idx_session_key ends in rowid, so there is nothing to sort
_FIND_ACTIVE = (
    "SELECT id FROM chat_sessions WHERE channel = ? AND conversation_key = ? AND user_id = ?"
    " AND agent_id = ? AND status = 'active' ORDER BY rowid DESC LIMIT 1"
)
_HISTORY_SINCE = (
    "SELECT id, turn_id, role, content, tool_calls, tool_call_id, name, is_error"
    " FROM messages WHERE session_id = ? AND id > ? ORDER BY id"
)
_SET_STATUS = "UPDATE chat_sessions SET status = ?, updated_at = ? WHERE id = ?"
_TOUCH_SESSION = "UPDATE chat_sessions SET updated_at = ? WHERE id = ?"
_SET_PLACEHOLDER = "UPDATE turns SET placeholder = ? WHERE id = ?"
_FINISH_TURN = (
    "UPDATE turns SET status = ?, final_text = ?, error = ?, finished_at = ? WHERE id = ?"
)


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _truncate(result: str) -> str:
    if len(result) <= AUDIT_RESULT_LIMIT:
        return result
    marker = f"\n…[truncated: {len(result)} chars in all]"
    return result[: AUDIT_RESULT_LIMIT - len(marker)] + marker


def _message_fields(m: Message) -> tuple[Any, ...]:
    calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls]
    return (
        m.role,
        m.content,
        json.dumps(calls) if calls else None,
        m.tool_call_id,
        m.name,
        int(m.is_error),
        None if m.usage is None else m.usage.input_tokens,
        None if m.usage is None else m.usage.output_tokens,
    )


def _history_item(row: tuple[Any, ...]) -> HistoryItem:
    _, turn_id, role, content, calls, call_id, name, is_error = row
    tool_calls = (
        tuple(ToolCall(c["id"], c["name"], c["arguments"]) for c in json.loads(calls))
        if calls
        else ()
    )
    return turn_id, Message(cast(Role, role), content, tool_calls, call_id, name, bool(is_error))


def _dicts(cursor: sqlite3.Cursor) -> list[dict[str, Any]]:
    keys = [d[0] for d in cursor.description]
    return [dict(zip(keys, row, strict=True)) for row in cursor]


def _settle(outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    for future, result, exc in outcomes:
        if future.cancelled():
            continue
        if exc is None:
            future.set_result(result)
        else:
            future.set_exception(exc)


def _check(status: str, allowed: frozenset[str], what: str) -> None:
    if status not in allowed:
        raise ValueError(f"unknown {what} status {status!r}; use one of {sorted(allowed)}")


# -- schema: forward migrations, one transaction each; append new ones, never edit old ones ---
# Message ids are INTEGER PRIMARY KEY without AUTOINCREMENT: SQLite hands out max(id) + 1, and
# messages are never deleted, so ids grow, which the history cache relies on.
# fmt: off
def _v1_core_tables(db: Database) -> None:
    db.table("chat_sessions").create({
        "id": str, "agent_id": str, "parent_session_id": str, "channel": str,
        "conversation_key": str, "user_id": str, "status": str, "persona_version": str,
        "created_at": str, "updated_at": str,
    }, pk="id", not_null={"agent_id", "channel", "conversation_key", "user_id", "status"})
    db.table("chat_sessions").create_index(["parent_session_id"])
    db.table("chat_sessions").create_index(
        ["channel", "conversation_key", "user_id", "agent_id", "status"],
        index_name="idx_session_key",
    )
    db.table("messages").create({
        "id": int, "session_id": str, "turn_id": str, "role": str, "content": str,
        "tool_calls": str, "tool_call_id": str, "name": str, "is_error": int,
        "tokens_in": int, "tokens_out": int, "created_at": str,
    }, pk="id", not_null={"session_id", "turn_id", "role", "content", "is_error"})
    db.table("messages").create_index(["session_id"])
    db.table("audit_logs").create({
        "id": int, "session_id": str, "turn_id": str, "call_id": str, "tool_name": str,
        "arguments": str, "result": str, "ok": int, "duration_ms": float, "created_at": str,
    }, pk="id", not_null={"session_id", "call_id", "tool_name", "ok"})
    db.table("audit_logs").create_index(["session_id"])
    db.table("turns").create({
        "id": str, "session_id": str, "channel": str, "conversation_key": str,
        "inbound_event_ids": str, "placeholder": str, "status": str, "final_text": str,
        "error": str, "created_at": str, "finished_at": str,
    }, pk="id", not_null={"session_id", "inbound_event_ids", "status"})
    db.table("memories").create({
        "id": int, "user_id": str, "memory_type": str, "content": str, "category": str,
        "importance": int, "created_at": str, "updated_at": str,
    }, pk="id", not_null={"user_id", "content"})
    db.table("memories").create_index(["user_id"])
    db.table("usage").create({
        "id": int, "session_id": str, "turn_id": str, "provider": str, "model": str,
        "input_tokens": int, "output_tokens": int, "created_at": str,
    }, pk="id", not_null={"session_id"})
# fmt: on


def _v2_titles_and_audit_extra(db: Database) -> None:
    db.table("chat_sessions").add_column("title", str)
    db.table("audit_logs").add_column("extra", str)  # AuditRecord.extra, as JSON


def _v3_memory_scope_and_orders(db: Database) -> None:
    db.table("memories").add_column("tenant", str, not_null_default="")
    db.table("memories").add_column("key", str)  # e.g. "intake:age": a newer value replaces it
    db.table("memories").create_index(["tenant", "user_id", "key"])
    db.table("orders").create(
        {
            "id": str,
            "tenant": str,
            "user_id": str,
            "session_id": str,
            "service": str,
            "category": str,
            "method": str,
            "amount": float,
            "currency": str,
            "status": str,
            "payment_url": str,
            "created_at": str,
            "expires_at": str,
        },
        pk="id",
        not_null={"tenant", "user_id", "service", "amount", "currency", "status"},
    )
    db.table("orders").create_index(["tenant", "user_id"])


MIGRATIONS: tuple[Callable[[Database], None], ...] = (
    _v1_core_tables,
    _v2_titles_and_audit_extra,
    _v3_memory_scope_and_orders,
)


def migrate(db: Database, *, target: int | None = None) -> list[int]:
    """Apply the migrations missing up to version `target` (default: all); returns those applied."""
    db.table("schema_migrations").create(
        {"version": int, "applied_at": str}, pk="version", if_not_exists=True
    )
    have = {row[0] for row in db.execute("SELECT version FROM schema_migrations")}
    if have and max(have) > len(MIGRATIONS):
        raise RuntimeError(
            f"database schema v{max(have)} is newer than this code (v{len(MIGRATIONS)}); "
            "upgrade the bot or point storage.path at another file"
        )
    applied: list[int] = []
    for version, step in enumerate(MIGRATIONS[:target], start=1):
        if version in have:
            continue
        db.execute("BEGIN IMMEDIATE")  # look again under the lock: another process may migrate
        try:
            done = db.execute("SELECT 1 FROM schema_migrations WHERE version = ?", [version])
            if done.fetchone() is None:
                step(db)
                db.execute("INSERT INTO schema_migrations VALUES (?, ?)", [version, _now()])
                applied.append(version)
            db.execute("COMMIT")
        except BaseException:
            db.rollback()
            raise
    return applied


class _History:
    """A session's cached history and the id of the last message row it includes."""

    __slots__ = ("items", "last_id")

    def __init__(self, last_id: int, items: list[HistoryItem]) -> None:
        self.last_id = last_id
        self.items = items


class SqliteStore:
    """The `agent.store.Store` protocol plus what the gateway needs, on one SQLite thread.

    Every public method is a coroutine that hands its work to a single-worker executor: the
    connection and the history cache live on that thread alone, so neither needs a lock.
    Calls queue up and one executor job runs all that are waiting, in order, each in its own
    transaction, then wakes the loop once for the lot: a thread hop costs more than a write.
    """

    _conn: sqlite3.Connection  # set and used on the store thread only

    def __init__(self, path: str | Path, *, history_cache_size: int = 256) -> None:
        self.path = path
        self.thread_ident: int | None = None  # the thread that owns the connection, once open
        self._executor: ThreadPoolExecutor | None = None
        self._jobs: deque[tuple[asyncio.Future[Any], Callable[..., Any], tuple[Any, ...]]] = deque()
        self._drain_queued = False  # set on the loop, cleared by the store thread
        self._histories: OrderedDict[str, _History] = OrderedDict()
        self._cache_size = history_cache_size

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def open(self) -> None:
        if self._executor is not None:
            raise RuntimeError(f"store {str(self.path)!r} is already open")
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-store")
        try:
            applied = await self._run(self._open_db)
        except BaseException:  # includes cancellation, after which _open_db may yet succeed
            self._executor.submit(self._close_db)
            self._executor.shutdown(wait=False)
            self._executor = None
            raise
        log.info("storage %s open, schema v%d (applied %s)", self.path, len(MIGRATIONS), applied)

    async def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is None:
            return
        try:
            await asyncio.get_running_loop().run_in_executor(executor, self._close_db)
        finally:
            executor.shutdown(wait=True)  # idle by now: only joins the thread

    # -- the Store protocol --------------------------------------------------------------
    async def create_session(
        self,
        *,
        agent_id: str,
        channel: str,
        conversation_key: str,
        user_id: str,
        parent_session_id: str | None = None,
        persona_version: str | None = None,
    ) -> str:
        key = (channel, conversation_key, user_id, agent_id)
        return await self._run(self._insert_session, key, parent_session_id, persona_version)

    async def set_session_status(self, session_id: str, status: str) -> None:
        _check(status, SESSION_STATUSES, "session")
        await self._run(self._update, _SET_STATUS, (status, _now(), session_id), "session")

    async def close_session(self, session_id: str) -> None:
        await self.set_session_status(session_id, "closed")

    async def load_history(self, session_id: str) -> list[tuple[str, Message]]:
        return await self._run(self._load_history_db, session_id)

    async def append_messages(
        self, session_id: str, turn_id: str, messages: Sequence[Message]
    ) -> None:
        if messages:
            await self._run(self._append_db, session_id, turn_id, tuple(messages))

    async def record_tool_call(self, record: AuditRecord) -> None:
        await self._run(self._record_tool_call_db, record)

    async def record_usage(
        self,
        *,
        session_id: str,
        turn_id: str | None,
        provider: str,
        model: str,
        input_tokens: int,
        output_tokens: int,
    ) -> None:
        row = (session_id, turn_id, provider, model, input_tokens, output_tokens)
        await self._run(self._insert, _INSERT_USAGE, row)

    # -- gateway -------------------------------------------------------------------------
    async def active_session(
        self,
        *,
        channel: str,
        conversation_key: str,
        user_id: str,
        agent_id: str = "default",
        persona_version: str | None = None,
    ) -> str:
        """The newest active session of this conversation, user and persona, else a new one."""
        key = (channel, conversation_key, user_id, agent_id)
        return await self._run(self._active_session_db, key, persona_version)

    async def create_turn(
        self,
        *,
        turn_id: str,
        session_id: str,
        channel: str,
        conversation_key: str,
        inbound_event_ids: list[str],
        placeholder: dict[str, Any] | None,
        status: str = "running",
    ) -> None:
        _check(status, TURN_STATUSES, "turn")
        turn = (turn_id, session_id, channel, conversation_key)
        await self._run(self._create_turn_db, turn, inbound_event_ids, placeholder, status)

    async def update_turn_placeholder(self, turn_id: str, placeholder: dict[str, Any]) -> None:
        await self._run(self._update, _SET_PLACEHOLDER, (json.dumps(placeholder), turn_id), "turn")

    async def finish_turn(
        self, turn_id: str, *, status: str, final_text: str | None = None, error: str | None = None
    ) -> None:
        _check(status, TURN_STATUSES, "turn")
        await self._run(
            self._update, _FINISH_TURN, (status, final_text, error, _now(), turn_id), "turn"
        )

    async def get_turn(self, turn_id: str) -> dict[str, Any] | None:
        turn = await self._one("SELECT * FROM turns WHERE id = ?", turn_id)
        if turn is not None:
            turn["inbound_event_ids"] = json.loads(turn["inbound_event_ids"])
            turn["placeholder"] = json.loads(turn["placeholder"]) if turn["placeholder"] else None
        return turn

    # -- admin views (raw rows) ----------------------------------------------------------
    async def get_session(self, session_id: str) -> dict[str, Any] | None:
        return await self._one("SELECT * FROM chat_sessions WHERE id = ?", session_id)

    async def child_sessions(self, session_id: str) -> list[dict[str, Any]]:
        sql = "SELECT * FROM chat_sessions WHERE parent_session_id = ? ORDER BY rowid"
        return await self._run(self._select, sql, session_id)

    async def audit_for_session(self, session_id: str) -> list[dict[str, Any]]:
        sql = "SELECT * FROM audit_logs WHERE session_id = ? ORDER BY id"
        return await self._run(self._select, sql, session_id)

    async def messages_for_session(self, session_id: str) -> list[dict[str, Any]]:
        sql = "SELECT * FROM messages WHERE session_id = ? ORDER BY id"
        return await self._run(self._select, sql, session_id)

    async def recent_sessions(
        self, *, limit: int = 20, root_only: bool = True
    ) -> list[dict[str, Any]]:
        """The newest sessions first (coordinator sessions only, unless `root_only` is False)."""
        where = "WHERE parent_session_id IS NULL" if root_only else ""
        sql = f"SELECT * FROM chat_sessions {where} ORDER BY updated_at DESC, rowid DESC LIMIT ?"
        return await self._run(self._select, sql, limit)

    async def find_sessions(self, prefix: str) -> list[dict[str, Any]]:
        """Sessions whose id starts with `prefix` (admins type short ids)."""
        sql = "SELECT * FROM chat_sessions WHERE id LIKE ? ORDER BY rowid LIMIT 10"
        return await self._run(self._select, sql, prefix.replace("%", "").replace("_", "") + "%")

    # -- tools: memories and orders, always scoped by tenant and user --------------------
    async def save_memory(
        self,
        *,
        tenant: str,
        user_id: str,
        memory_type: str,
        content: str,
        category: str | None,
        importance: int,
        key: str | None = None,
    ) -> int:
        row = (tenant, user_id, memory_type, content, category, importance, key)
        return await self._run(self._save_memory_db, row)

    async def list_memories(
        self, *, tenant: str, user_id: str, limit: int = 200
    ) -> list[dict[str, Any]]:
        sql = (
            "SELECT * FROM memories WHERE tenant = ? AND user_id = ?"
            " ORDER BY importance DESC, updated_at DESC LIMIT ?"
        )
        return await self._run(self._select, sql, tenant, user_id, limit)

    async def create_order(self, order: Mapping[str, Any]) -> None:
        await self._run(self._create_order_db, dict(order))

    async def get_order(self, order_id: str) -> dict[str, Any] | None:
        return await self._one("SELECT * FROM orders WHERE id = ?", order_id)

    async def usage_for_session(self, session_id: str) -> list[dict[str, Any]]:
        sql = "SELECT * FROM usage WHERE session_id = ? ORDER BY id"
        return await self._run(self._select, sql, session_id)

    async def turn_usage(self, turn_id: str) -> dict[str, Any]:
        """A turn's totals: model calls, input and output tokens (all providers of a fallback)."""
        sql = (
            "SELECT count(*) AS model_calls, coalesce(sum(input_tokens), 0) AS input_tokens,"
            " coalesce(sum(output_tokens), 0) AS output_tokens FROM usage WHERE turn_id = ?"
        )
        [totals] = await self._run(self._select, sql, turn_id)
        return totals

    # -- plumbing (loop side) ------------------------------------------------------------
    def _run(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        if self._executor is None:
            raise RuntimeError(
                f"store {str(self.path)!r} is not open; await store.open() or use `async with`"
            )
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.append((future, fn, args))
        # A drain that is queued but not started will see this job: it clears the flag before
        # it looks at the deque. Otherwise queue one; at worst it finds the deque empty.
        if not self._drain_queued:
            self._drain_queued = True
            self._executor.submit(self._drain, loop)
        return future

    async def _one(self, sql: str, key: str) -> dict[str, Any] | None:
        rows = await self._run(self._select, sql, key)
        return rows[0] if rows else None

    # -- everything below runs on the store thread only ----------------------------------
    def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        """Run every waiting job, then settle their futures in one loop callback.

        A job runs even if its caller was cancelled meanwhile, so a write is never half-known:
        it lands, and the cancelled caller just does not hear about it.
        """
        self._drain_queued = False
        outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]] = []
        # only the jobs here now: later ones queue their own drain, so no caller waits on an
        # endless stream of newer work before hearing back
        for _ in range(len(self._jobs)):
            future, fn, args = self._jobs.popleft()
            try:
                outcomes.append((future, fn(*args), None))
            except BaseException as exc:  # each outcome goes to its own caller, who re-raises
                outcomes.append((future, None, exc))
        if outcomes:
            loop.call_soon_threadsafe(_settle, outcomes)

    def _open_db(self) -> list[int]:
        memory = str(self.path) == ":memory:"
        if not memory:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        # autocommit: each lone statement is its own short transaction; batches use BEGIN
        conn = sqlite3.connect(str(self.path), isolation_level=None)
        try:
            db = Database(conn, recursive_triggers=False, execute_plugins=False)
            conn.execute("PRAGMA busy_timeout = 5000")  # other processes may share the file
            if not memory:
                db.enable_wal()
            conn.execute("PRAGMA synchronous = NORMAL")  # WAL makes this crash-safe
            applied = migrate(db)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self.thread_ident = threading.get_ident()
        return applied

    def _close_db(self) -> None:
        self._histories.clear()
        conn: sqlite3.Connection | None = vars(self).pop("_conn", None)
        if conn is not None:
            conn.execute("PRAGMA optimize")
            conn.close()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")  # IMMEDIATE: read-then-write must not deadlock on upgrade
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _select(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        return _dicts(self._conn.execute(sql, params))

    def _insert(self, sql: str, row: tuple[Any, ...]) -> None:
        self._conn.execute(sql, (*row, _now()))

    def _update(self, sql: str, params: tuple[Any, ...], what: str) -> None:
        if self._conn.execute(sql, params).rowcount == 0:
            raise LookupError(f"no {what} with id {params[-1]!r}; create it first")

    def _insert_session(
        self, key: SessionKey, parent_session_id: str | None, persona_version: str | None
    ) -> str:
        session_id, now = uuid.uuid4().hex, _now()
        row = (session_id, *key, parent_session_id, "active", persona_version, now, now)
        self._conn.execute(_INSERT_SESSION, row)
        self._remember(session_id, _History(0, []))  # a new session's history is known: empty
        return session_id

    def _active_session_db(self, key: SessionKey, persona_version: str | None) -> str:
        row = self._conn.execute(_FIND_ACTIVE, key).fetchone()
        if row is None:
            with self._transaction() as conn:  # look again under the lock: other processes
                row = conn.execute(_FIND_ACTIVE, key).fetchone()
                if row is None:
                    return self._insert_session(key, None, persona_version)
        return cast(str, row[0])

    def _remember(self, session_id: str, history: _History) -> None:
        self._histories[session_id] = history
        if len(self._histories) > self._cache_size:
            self._histories.popitem(last=False)

    def _load_history_db(self, session_id: str) -> list[HistoryItem]:
        history = self._histories.get(session_id)
        # A cached history still asks for rows past its last id: another process sharing the
        # file may have written to this session. Normally that is one index probe, zero rows.
        rows = self._conn.execute(
            _HISTORY_SINCE, (session_id, 0 if history is None else history.last_id)
        ).fetchall()
        if history is None:
            history = _History(0, [])
            self._remember(session_id, history)
        else:
            self._histories.move_to_end(session_id)
        if rows:
            history.items.extend(map(_history_item, rows))
            history.last_id = rows[-1][0]
        return list(history.items)

    def _append_db(self, session_id: str, turn_id: str, messages: tuple[Message, ...]) -> None:
        now = _now()
        rows = [(session_id, turn_id, *_message_fields(m), now) for m in messages]
        history = self._histories.get(session_id)
        with self._transaction() as conn:
            # rows another process added since our cache was filled must precede ours in it
            missed = (
                []
                if history is None
                else conn.execute(_HISTORY_SINCE, (session_id, history.last_id)).fetchall()
            )
            conn.executemany(_INSERT_MESSAGE, rows)
            last_id = conn.execute("SELECT last_insert_rowid()").fetchone()[0]
            conn.execute(_TOUCH_SESSION, (now, session_id))
        if history is not None:
            history.items.extend(map(_history_item, missed))
            history.items.extend((turn_id, m) for m in messages)
            history.last_id = last_id
            self._histories.move_to_end(session_id)

    def _record_tool_call_db(self, r: AuditRecord) -> None:
        extra = json.dumps(r.extra, default=str) if r.extra else None
        call = (r.session_id, r.turn_id, r.call_id, r.tool_name, r.arguments)
        self._insert(_INSERT_AUDIT, (*call, _truncate(r.result), int(r.ok), r.duration_ms, extra))

    def _save_memory_db(self, row: tuple[Any, ...]) -> int:
        tenant, user_id, memory_type, content, category, importance, key = row
        now = _now()
        with self._transaction() as conn:
            found = conn.execute(
                "SELECT id FROM memories WHERE tenant = ? AND user_id = ? AND "
                + ("key = ?" if key else "key IS NULL AND content = ? COLLATE NOCASE"),
                (tenant, user_id, key or content),
            ).fetchone()
            if found is not None:
                conn.execute(
                    "UPDATE memories SET memory_type = ?, content = ?, category = ?,"
                    " importance = ?, updated_at = ? WHERE id = ?",
                    (memory_type, content, category, importance, now, found[0]),
                )
                return cast(int, found[0])
            cursor = conn.execute(
                "INSERT INTO memories (tenant, user_id, memory_type, content, category,"
                " importance, key, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*row, now, now),
            )
            return cast(int, cursor.lastrowid)

    def _create_order_db(self, order: dict[str, Any]) -> None:
        unknown = set(order) - set(_ORDER_COLUMNS)
        if unknown:
            raise ValueError(f"unknown order fields {sorted(unknown)}; known: {_ORDER_COLUMNS}")
        order.setdefault("created_at", _now())
        self._conn.execute(_INSERT_ORDER, tuple(order.get(c) for c in _ORDER_COLUMNS))

    def _create_turn_db(
        self,
        turn: tuple[str, str, str, str],
        inbound_event_ids: list[str],
        placeholder: dict[str, Any] | None,
        status: str,
    ) -> None:
        handle = None if placeholder is None else json.dumps(placeholder)
        row = (*turn, json.dumps(inbound_event_ids), handle, status, _now())
        self._conn.execute(_INSERT_TURN, row)
