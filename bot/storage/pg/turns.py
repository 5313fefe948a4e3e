"""Turns on PostgreSQL: each reply's inbound events, placeholder and outcome."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from adapters.base import ChatRef
from bot.storage.pg.connection import PgConnection, fetch_rows, rowcount
from bot.storage.schema import TURN_STATUSES, check_status, now
from bot.storage.turns import EVENT_LOOKBACK, _decode, chat_from_record, took_events

if TYPE_CHECKING:
    from bot.storage.pg.conn import Conn

_INSERT_TURN = (
    "INSERT INTO turns (id, session_id, channel, conversation_key, inbound_event_ids,"
    " placeholder, status, created_at, inbound_messages)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
)
# The newest turns of the session `active_session` would find (it never creates one here).
_RECENT_TURNS = (
    "SELECT id, status, inbound_messages, placeholder, final_text FROM turns WHERE session_id ="
    " (SELECT id FROM chat_sessions WHERE channel = $1 AND conversation_key = $2"
    " AND user_id = $3 AND agent_id = $4 AND status = 'active' ORDER BY seq DESC LIMIT 1)"
    " ORDER BY seq DESC LIMIT $5"
)
_SET_PLACEHOLDER = "UPDATE turns SET placeholder = $1 WHERE id = $2"
_NEWEST_TURNS = "SELECT * FROM turns WHERE conversation_key = $1 ORDER BY seq DESC LIMIT $2"
_UNFINISHED = "SELECT * FROM turns WHERE status = 'running' ORDER BY seq"
_LAST_PLACEHOLDER = (
    "SELECT placeholder FROM turns WHERE conversation_key = $1 ORDER BY seq DESC LIMIT 1"
)
# A user's newest turn among conversations under a key prefix (no LIKE: nothing to escape).
_LATEST_CONVERSATION = (
    "SELECT t.conversation_key FROM turns t JOIN chat_sessions s ON s.id = t.session_id"
    " WHERE t.channel = $1 AND s.user_id = $2 AND starts_with(t.conversation_key, $3)"
    " ORDER BY t.seq DESC LIMIT 1"
)
_RESUME = (
    "UPDATE turns SET resume_attempts = resume_attempts + 1 WHERE id = $1 AND status = 'running'"
)
_TURN_AND_CALLER = (
    "SELECT t.*, s.user_id, s.agent_id FROM turns t JOIN chat_sessions s ON s.id = t.session_id"
    " WHERE t.id = $1"
)
_TURN_CALLS = (
    "SELECT call_id, tool_name, result, ok, extra FROM audit_logs"
    " WHERE session_id = $1 AND turn_id = $2 ORDER BY id"
)
_RUNNING_WORKERS = (
    "SELECT * FROM chat_sessions WHERE status = 'running' AND parent_session_id IS NOT NULL"
    " ORDER BY seq"
)
_FINISH_TURN = (
    "UPDATE turns SET status = $1, final_text = $2, error = $3, finished_at = $4 WHERE id = $5"
)


class PgTurnLog(PgConnection):
    """Create, update, finish and read turns."""

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
        inbound_messages: list[dict[str, str]] | None = None,
    ) -> None:
        check_status(status, TURN_STATUSES, "turn")
        handle = None if placeholder is None else json.dumps(placeholder)
        shown = None if inbound_messages is None else json.dumps(inbound_messages)
        row = (turn_id, session_id, channel, conversation_key, json.dumps(inbound_event_ids))
        await self._run(_execute, _INSERT_TURN, *row, handle, status, now(), shown)

    async def update_turn_placeholder(self, turn_id: str, placeholder: dict[str, Any]) -> None:
        await self._run(update, _SET_PLACEHOLDER, (json.dumps(placeholder), turn_id), "turn")

    async def finish_turn(
        self, turn_id: str, *, status: str, final_text: str | None = None, error: str | None = None
    ) -> None:
        check_status(status, TURN_STATUSES, "turn")
        params = (status, final_text, error, now(), turn_id)
        await self._run(update, _FINISH_TURN, params, "turn")

    async def unfinished_turns(self) -> list[dict[str, Any]]:
        """Turns left `running`, oldest first (see `SqliteStore.unfinished_turns`: only meaningful
        when no other live gateway process shares the database)."""
        return [_decode(turn) for turn in await self._select(_UNFINISHED)]

    async def turn_for_events(
        self, conversation_key: str, event_ids: list[str]
    ) -> dict[str, Any] | None:
        """The newest turn that took any of these events (see `SqliteStore.turn_for_events`)."""
        rows = await self._select(_NEWEST_TURNS, conversation_key, EVENT_LOOKBACK)
        return took_events(rows, event_ids)

    async def begin_resume(self, turn_id: str) -> dict[str, Any] | None:
        """Take up a turn interrupted by a crash (see `SqliteStore.begin_resume`)."""
        row = await self._run(_begin_resume, turn_id)
        return None if row is None else _decode(row)

    async def turn_tool_calls(self, turn_id: str, session_id: str) -> list[dict[str, Any]]:
        """The audit rows of one session's calls in a turn, oldest first; `extra` decoded."""
        rows = await self._select(_TURN_CALLS, session_id, turn_id)
        for row in rows:
            row["extra"] = json.loads(row["extra"]) if row["extra"] else {}
        return rows

    async def running_worker_sessions(self) -> list[dict[str, Any]]:
        """Specialist sessions still `running`, oldest first."""
        return await self._select(_RUNNING_WORKERS)

    async def conversation_chat(self, conversation_key: str) -> ChatRef | None:
        """Where the conversation's newest turn was answered (to deliver follow-ups there)."""
        row = await self._one(_LAST_PLACEHOLDER, conversation_key)
        if row is None or not row["placeholder"]:
            return None
        return chat_from_record(json.loads(row["placeholder"]))

    async def latest_conversation(
        self, *, channel: str, key_prefix: str, user_id: str
    ) -> str | None:
        """The conversation under `key_prefix` where this user's newest turn was."""
        row = await self._one(_LATEST_CONVERSATION, channel, user_id, key_prefix)
        return None if row is None else str(row["conversation_key"])

    async def recent_turns(
        self,
        *,
        channel: str,
        conversation_key: str,
        user_id: str,
        agent_id: str = "default",
        limit: int = 100,
    ) -> list[dict[str, Any]]:
        """The newest `limit` turns of the conversation's active session, oldest first (see
        `SqliteStore.recent_turns`)."""
        key = (channel, conversation_key, user_id, agent_id)
        rows = await self._select(_RECENT_TURNS, *key, limit)
        for row in rows:
            shown = row["inbound_messages"]
            row["inbound_messages"] = json.loads(shown) if shown else []
            row["placeholder"] = json.loads(row["placeholder"]) if row["placeholder"] else None
        return rows[::-1]

    async def get_turn(self, turn_id: str) -> dict[str, Any] | None:
        turn = await self._one("SELECT * FROM turns WHERE id = $1", turn_id)
        return None if turn is None else _decode(turn)


async def _begin_resume(conn: Conn, turn_id: str) -> dict[str, Any] | None:
    async with conn.transaction():
        if rowcount(await conn.execute(_RESUME, turn_id)) == 0:
            return None
        rows = await fetch_rows(conn, _TURN_AND_CALLER, turn_id)
    return rows[0] if rows else None


async def _execute(conn: Conn, sql: str, *params: Any) -> None:
    await conn.execute(sql, *params)


async def update(conn: Conn, sql: str, params: tuple[Any, ...], what: str) -> None:
    """An UPDATE of one row by id (the last parameter); LookupError when there is none."""
    if rowcount(await conn.execute(sql, *params)) == 0:
        raise LookupError(f"no {what} with id {params[-1]!r}; create it first")
