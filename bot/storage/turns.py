"""Turns: the gateway's record of each reply, its inbound events, placeholder and outcome."""

from __future__ import annotations

import json
from typing import Any

from adapters.base import ChatRef, MessageHandle
from bot.storage.connection import StoreConnection
from bot.storage.schema import TURN_STATUSES, check_status, insert_sql, now

_INSERT_TURN = insert_sql(
    "turns",
    "id session_id channel conversation_key inbound_event_ids placeholder status created_at"
    " inbound_messages",
)
_SET_PLACEHOLDER = "UPDATE turns SET placeholder = ? WHERE id = ?"
_UNFINISHED = "SELECT * FROM turns WHERE status = 'running' ORDER BY rowid"
_LAST_PLACEHOLDER = (
    "SELECT placeholder FROM turns WHERE conversation_key = ? ORDER BY rowid DESC LIMIT 1"
)
# A conversation's newest turns, finished or not: which of them took a batch's events.
_NEWEST_TURNS = "SELECT * FROM turns WHERE conversation_key = ? ORDER BY rowid DESC LIMIT ?"
EVENT_LOOKBACK = 20  # a batch taken over is among its conversation's newest turns (one at a time)
# A user's newest turn among conversations under a key prefix (`substr`, not LIKE: no escaping).
_LATEST_CONVERSATION = (
    "SELECT t.conversation_key FROM turns t JOIN chat_sessions s ON s.id = t.session_id"
    " WHERE t.channel = ? AND s.user_id = ? AND substr(t.conversation_key, 1, length(?)) = ?"
    " ORDER BY t.rowid DESC LIMIT 1"
)
_RESUME = (
    "UPDATE turns SET resume_attempts = resume_attempts + 1 WHERE id = ? AND status = 'running'"
)
_TURN_AND_CALLER = (
    "SELECT t.*, s.user_id, s.agent_id FROM turns t JOIN chat_sessions s ON s.id = t.session_id"
    " WHERE t.id = ?"
)
_TURN_CALLS = (
    "SELECT call_id, tool_name, result, ok, extra FROM audit_logs"
    " WHERE session_id = ? AND turn_id = ? ORDER BY id"
)
_RUNNING_WORKERS = (
    "SELECT * FROM chat_sessions WHERE status = 'running' AND parent_session_id IS NOT NULL"
    " ORDER BY rowid"
)
# The newest turns of the session `active_session` would find (it never creates one here).
_RECENT_TURNS = (
    "SELECT id, status, inbound_messages, placeholder, final_text FROM turns WHERE session_id ="
    " (SELECT id FROM chat_sessions WHERE channel = ? AND conversation_key = ? AND user_id = ?"
    " AND agent_id = ? AND status = 'active' ORDER BY rowid DESC LIMIT 1)"
    " ORDER BY rowid DESC LIMIT ?"
)
_FINISH_TURN = (
    "UPDATE turns SET status = ?, final_text = ?, error = ?, finished_at = ? WHERE id = ?"
)


class TurnLog(StoreConnection):
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
        turn = (turn_id, session_id, channel, conversation_key)
        shown = None if inbound_messages is None else json.dumps(inbound_messages)
        await self._run(self._create_turn_db, turn, inbound_event_ids, placeholder, status, shown)

    async def update_turn_placeholder(self, turn_id: str, placeholder: dict[str, Any]) -> None:
        await self._run(self._update, _SET_PLACEHOLDER, (json.dumps(placeholder), turn_id), "turn")

    async def finish_turn(
        self, turn_id: str, *, status: str, final_text: str | None = None, error: str | None = None
    ) -> None:
        check_status(status, TURN_STATUSES, "turn")
        await self._run(
            self._update, _FINISH_TURN, (status, final_text, error, now(), turn_id), "turn"
        )

    async def unfinished_turns(self) -> list[dict[str, Any]]:
        """Turns left `running` (by a process that died mid-turn, in embedded mode), oldest first.

        Only meaningful for a store no other live gateway process shares: theirs may be running.
        """
        rows = await self._run(self._select, _UNFINISHED)
        for turn in rows:
            _decode(turn)
        return rows

    async def turn_for_events(
        self, conversation_key: str, event_ids: list[str]
    ) -> dict[str, Any] | None:
        """The newest turn of the conversation that took any of these inbound events, finished
        or not: a batch taken over from a dead process may have been answered already."""
        rows = await self._run(self._select, _NEWEST_TURNS, conversation_key, EVENT_LOOKBACK)
        return took_events(rows, event_ids)

    async def begin_resume(self, turn_id: str) -> dict[str, Any] | None:
        """Take up a turn interrupted by a crash: count the attempt and return the turn (with
        its session's `user_id` and `agent_id`); None when it is no longer `running`."""
        row = await self._run(self._begin_resume_db, turn_id)
        return None if row is None else _decode(row)

    async def turn_tool_calls(self, turn_id: str, session_id: str) -> list[dict[str, Any]]:
        """The audit rows of one session's calls in a turn, oldest first; `extra` decoded."""
        rows = await self._run(self._select, _TURN_CALLS, session_id, turn_id)
        for row in rows:
            row["extra"] = json.loads(row["extra"]) if row["extra"] else {}
        return rows

    async def running_worker_sessions(self) -> list[dict[str, Any]]:
        """Specialist sessions still `running` (left so by a process that died, in embedded
        mode), oldest first."""
        return await self._run(self._select, _RUNNING_WORKERS)

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
        args = (channel, user_id, key_prefix, key_prefix)
        rows = await self._run(self._select, _LATEST_CONVERSATION, *args)
        return str(rows[0]["conversation_key"]) if rows else None

    async def recent_turns(
        self,
        *,
        channel: str,
        conversation_key: str,
        user_id: str,
        agent_id: str = "default",
        limit: int = 100,
    ) -> list[dict[str, Any]]:
        """The newest `limit` turns of the conversation's active session, oldest first (none
        without one; never creates one): `id`, `status`, `inbound_messages`, `placeholder`
        (both decoded), `final_text`."""
        key = (channel, conversation_key, user_id, agent_id)
        rows = await self._run(self._select, _RECENT_TURNS, *key, limit)
        for row in rows:
            shown = row["inbound_messages"]
            row["inbound_messages"] = json.loads(shown) if shown else []
            row["placeholder"] = json.loads(row["placeholder"]) if row["placeholder"] else None
        return rows[::-1]

    async def get_turn(self, turn_id: str) -> dict[str, Any] | None:
        turn = await self._one("SELECT * FROM turns WHERE id = ?", turn_id)
        return None if turn is None else _decode(turn)

    # -- the SQL, one short transaction each --------------------------------------------
    def _begin_resume_db(self, turn_id: str) -> dict[str, Any] | None:
        with self._transaction() as conn:
            if conn.execute(_RESUME, (turn_id,)).rowcount == 0:
                return None
            rows = self._select(_TURN_AND_CALLER, turn_id)
        return rows[0] if rows else None

    def _create_turn_db(
        self,
        turn: tuple[str, str, str, str],
        inbound_event_ids: list[str],
        placeholder: dict[str, Any] | None,
        status: str,
        inbound_messages: str | None,
    ) -> None:
        handle = None if placeholder is None else json.dumps(placeholder)
        row = (*turn, json.dumps(inbound_event_ids), handle, status, now(), inbound_messages)
        self._conn.execute(_INSERT_TURN, row)


def took_events(rows: list[dict[str, Any]], event_ids: list[str]) -> dict[str, Any] | None:
    """The first of `rows` (undecoded turns) whose inbound events include one of `event_ids`."""
    wanted = set(event_ids)
    for row in rows:
        if wanted & set(json.loads(row["inbound_event_ids"])):
            return _decode(row)
    return None


def _decode(turn: dict[str, Any]) -> dict[str, Any]:
    turn["inbound_event_ids"] = json.loads(turn["inbound_event_ids"])
    turn["placeholder"] = json.loads(turn["placeholder"]) if turn["placeholder"] else None
    return turn


def handle_record(handle: MessageHandle) -> dict[str, Any]:
    """A placeholder handle as JSON-able data: enough to edit the message after a restart."""
    chat = handle.chat
    return {
        "channel": chat.channel,
        "chat_id": chat.chat_id,
        "thread_id": chat.thread_id,
        "team_id": chat.team_id,
        "message_id": handle.message_id,
        "data": dict(handle.data),
    }


def chat_record(chat: ChatRef) -> dict[str, Any]:
    """Where the placeholder goes, recorded before it is posted: a turn whose process died
    before it learned the placeholder's id is resumed in a new placeholder there."""
    return {
        "channel": chat.channel,
        "chat_id": chat.chat_id,
        "thread_id": chat.thread_id,
        "team_id": chat.team_id,
    }


def chat_from_record(record: dict[str, Any]) -> ChatRef | None:
    """The chat of a handle record or of a `chat_record`; None for an old partial record."""
    if "channel" not in record or "chat_id" not in record:
        return None
    return ChatRef(
        record["channel"], record["chat_id"], record.get("thread_id"), record.get("team_id")
    )


def handle_from_record(record: dict[str, Any]) -> MessageHandle | None:
    """The handle back; None for a record from before handles were stored whole, or for a
    `chat_record` (the placeholder was not posted, or its id not learned)."""
    chat = chat_from_record(record)
    if chat is None or "message_id" not in record:
        return None
    return MessageHandle(chat, record["message_id"], record.get("data") or {})
