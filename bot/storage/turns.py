"""Turns: the gateway's record of each reply, its inbound events, placeholder and outcome."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from adapters.base import ChatRef, MessageHandle
from agent.store import UsageRow
from agent.types import Message
from bot.storage.query import Query, params
from bot.storage.rows import ResumedTurn, ToolCallRow, TurnRow
from bot.storage.schema import TURN_STATUSES, check_status, now
from bot.storage.sessions import ACTIVE_SESSION
from bot.storage.tables import audit_logs, chat_sessions, creation_order, turns
from bot.storage.tx import Row, StoreCalls, Tx, update_one
from content.parts import Part, parts_from_json, parts_to_json

T, S, A = turns, chat_sessions, audit_logs
EVENT_LOOKBACK = 20  # a batch taken over is among its conversation's newest turns (one at a time)
_NEWEST_FIRST = creation_order(T).desc()

_INSERT = Query(
    sa.insert(T).values(
        params(
            "id", "session_id", "channel", "conversation_key", "inbound_event_ids",
            "placeholder", "status", "created_at", "inbound_messages",
        )
    )
)  # fmt: skip
_SET_PLACEHOLDER = Query(
    sa.update(T).values(params("placeholder")).where(T.c.id == sa.bindparam("turn_id"))
)
_FINISH = Query(
    sa.update(T)
    .values(params("status", "final_text", "error", "finished_at", "final_parts"))
    .where(T.c.id == sa.bindparam("turn_id"))
)
_GET = Query(sa.select(T).where(T.c.id == sa.bindparam("turn_id")))
_UNFINISHED = Query(sa.select(T).where(T.c.status == "running").order_by(creation_order(T)))
# A conversation's newest turns, finished or not: which of them took a batch's events.
_NEWEST = Query(
    sa.select(T)
    .where(T.c.conversation_key == sa.bindparam("key"))
    .order_by(_NEWEST_FIRST)
    .limit(EVENT_LOOKBACK)
)
_LAST_PLACEHOLDER = Query(
    sa.select(T.c.placeholder)
    .where(T.c.conversation_key == sa.bindparam("key"))
    .order_by(_NEWEST_FIRST)
    .limit(1)
)
# A user's newest turn among conversations under a key prefix (`substr`, not LIKE: no escaping).
_PREFIX = sa.cast(sa.bindparam("prefix"), sa.Text)
_LATEST_CONVERSATION = Query(
    sa.select(T.c.conversation_key)
    .join(S, S.c.id == T.c.session_id)
    .where(
        T.c.channel == sa.bindparam("channel"),
        S.c.user_id == sa.bindparam("user_id"),
        sa.func.substr(T.c.conversation_key, 1, sa.func.length(_PREFIX)) == _PREFIX,
    )
    .order_by(_NEWEST_FIRST)
    .limit(1)
)
# A turn that was `waiting` for approval goes on without counting as a crash's resumption (its
# attempts stay as they were: 0 for a turn no crash interrupted).
_RESUME = Query(
    sa.update(T)
    .values(
        resume_attempts=sa.case(
            (T.c.status == "running", T.c.resume_attempts + 1), else_=T.c.resume_attempts
        ),
        status="running",
    )
    .where(T.c.id == sa.bindparam("turn_id"), T.c.status.in_(("running", "waiting")))
)
_TURN_AND_CALLER = Query(
    sa.select(T, S.c.user_id, S.c.agent_id)
    .join(S, S.c.id == T.c.session_id)
    .where(T.c.id == sa.bindparam("turn_id"))
)
_TURN_CALLS = Query(
    sa.select(A.c.call_id, A.c.tool_name, A.c.result, A.c.ok, A.c.extra)
    .where(A.c.session_id == sa.bindparam("session_id"), A.c.turn_id == sa.bindparam("turn_id"))
    .order_by(A.c.id)
)
# The newest turns of the session `active_session` would find (it never creates one here).
_RECENT = Query(
    sa.select(T)
    .where(T.c.session_id == ACTIVE_SESSION.scalar_subquery())
    .order_by(_NEWEST_FIRST)
    .limit(sa.bindparam("limit"))
)


class TurnLog(StoreCalls):
    """Create, update, finish and read turns."""

    # the message log's append (bot.storage.messages), beside this in every store: a turn's
    # first messages are appended with it, and join the history cache as appends do
    _append_with: Callable[
        [str, str, tuple[Message, ...], tuple[UsageRow, ...], dict[str, Any]],
        Coroutine[Any, Any, None],
    ]

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
        messages: Sequence[Message] = (),
    ) -> None:
        """`messages`: the turn's first messages (the user's), appended in the same transaction:
        one write where two would be."""
        check_status(status, TURN_STATUSES, "turn")
        row = {
            "id": turn_id,
            "session_id": session_id,
            "channel": channel,
            "conversation_key": conversation_key,
            "inbound_event_ids": json.dumps(inbound_event_ids),
            "placeholder": None if placeholder is None else json.dumps(placeholder),
            "status": status,
            "inbound_messages": None if inbound_messages is None else json.dumps(inbound_messages),
        }
        if messages:
            await self._append_with(session_id, turn_id, tuple(messages), (), row)
        else:
            await self._tx(insert_turn, row)

    async def update_turn_placeholder(self, turn_id: str, placeholder: dict[str, Any]) -> None:
        await self._tx(_set_placeholder, turn_id, json.dumps(placeholder))

    async def finish_turn(
        self,
        turn_id: str,
        *,
        status: str,
        final_text: str | None = None,
        error: str | None = None,
        final_parts: Sequence[Part] = (),
    ) -> None:
        """`final_parts`: the media the final answer went out with (by reference, as JSON)."""
        check_status(status, TURN_STATUSES, "turn")
        await self._tx(_finish, turn_id, status, final_text, error, parts_to_json(final_parts))

    async def unfinished_turns(self) -> list[TurnRow]:
        """Turns left `running` (by a process that died mid-turn, in embedded mode), oldest first.

        Only meaningful for a store no other live gateway process shares: theirs may be running.
        """
        return await self._tx(fetch_turns, _UNFINISHED)

    async def turn_for_events(self, conversation_key: str, event_ids: list[str]) -> TurnRow | None:
        """The newest turn of the conversation that took any of these inbound events, finished
        or not: a batch taken over from a dead process may have been answered already."""
        wanted = set(event_ids)
        for turn in await self._tx(fetch_turns, _NEWEST, key=conversation_key):
            if wanted.intersection(turn.inbound_event_ids):
                return turn
        return None

    async def begin_resume(self, turn_id: str) -> ResumedTurn | None:
        """Take up a turn interrupted by a crash: count the attempt and return the turn (with
        its session's `user_id` and `agent_id`); None when it is no longer `running`."""
        return await self._tx(_begin_resume, turn_id)

    async def turn_tool_calls(self, turn_id: str, session_id: str) -> list[ToolCallRow]:
        """The audit rows of one session's calls in a turn, oldest first; `extra` decoded."""
        return await self._tx(_tool_calls, turn_id, session_id)

    async def conversation_chat(self, conversation_key: str) -> ChatRef | None:
        """Where the conversation's newest turn was answered (to deliver follow-ups there)."""
        placeholder = await self._tx(_last_placeholder, conversation_key)
        return None if not placeholder else chat_from_record(json.loads(placeholder))

    async def latest_conversation(
        self, *, channel: str, key_prefix: str, user_id: str
    ) -> str | None:
        """The conversation under `key_prefix` where this user's newest turn was."""
        return await self._tx(_latest_conversation, channel, key_prefix, user_id)

    async def recent_turns(
        self,
        *,
        channel: str,
        conversation_key: str,
        user_id: str,
        agent_id: str = "default",
        limit: int = 100,
    ) -> list[TurnRow]:
        """The newest `limit` turns of the conversation's active session, oldest first (none
        without one; never creates one)."""
        key = {"channel": channel, "conversation_key": conversation_key, "user_id": user_id}
        turns = await self._tx(fetch_turns, _RECENT, agent_id=agent_id, limit=limit, **key)
        return turns[::-1]

    async def get_turn(self, turn_id: str) -> TurnRow | None:
        found = await self._tx(fetch_turns, _GET, turn_id=turn_id)
        return found[0] if found else None


# -- the calls, written once for both backends -----------------------------------------
async def insert_turn(tx: Tx, /, row: dict[str, Any]) -> None:
    await tx.execute(_INSERT, row, created_at=now())


async def _set_placeholder(tx: Tx, /, turn_id: str, placeholder: str) -> None:
    await update_one(
        tx, _SET_PLACEHOLDER, "turn", turn_id, turn_id=turn_id, placeholder=placeholder
    )


async def _finish(
    tx: Tx,
    /,
    turn_id: str,
    status: str,
    final_text: str | None,
    error: str | None,
    final_parts: str | None,
) -> None:
    values = {
        "turn_id": turn_id,
        "status": status,
        "final_text": final_text,
        "error": error,
        "finished_at": now(),
        "final_parts": final_parts,
    }
    await update_one(tx, _FINISH, "turn", turn_id, values)


async def fetch_turns(tx: Tx, query: Query, /, **values: Any) -> list[TurnRow]:
    """The rows of a query of whole `turns` rows, as records (their JSON decoded)."""
    return [turn_row(row) for row in await tx.fetch(query, **values)]


async def _begin_resume(tx: Tx, /, turn_id: str) -> ResumedTurn | None:
    async with tx.transaction():
        if await tx.execute(_RESUME, turn_id=turn_id) == 0:
            return None
        row = await tx.fetchone(_TURN_AND_CALLER, turn_id=turn_id)
    if row is None:
        return None
    fields = dict(zip(_TURN_FIELDS, _turn_fields(row), strict=True))
    return ResumedTurn(**fields, user_id=row[14], agent_id=row[15])


async def _tool_calls(tx: Tx, /, turn_id: str, session_id: str) -> list[ToolCallRow]:
    rows = await tx.fetch(_TURN_CALLS, session_id=session_id, turn_id=turn_id)
    return [
        ToolCallRow(call_id, name, result, bool(ok), json.loads(extra) if extra else {})
        for call_id, name, result, ok, extra in rows
    ]


async def _last_placeholder(tx: Tx, /, conversation_key: str) -> str | None:
    row = await tx.fetchone(_LAST_PLACEHOLDER, key=conversation_key)
    return None if row is None else row[0]


async def _latest_conversation(tx: Tx, /, channel: str, prefix: str, user_id: str) -> str | None:
    row = await tx.fetchone(_LATEST_CONVERSATION, channel=channel, user_id=user_id, prefix=prefix)
    return None if row is None else str(row[0])


_TURN_FIELDS = [field.name for field in dataclasses.fields(TurnRow)]


def turn_row(row: Row) -> TurnRow:
    return TurnRow(*_turn_fields(row))


def _turn_fields(row: Row) -> tuple[Any, ...]:
    """A `turns` row's fields (its columns in `tables.turns` order, maybe more after), the JSON
    ones decoded."""
    event_ids, placeholder, shown = row[4], row[5], row[12]
    return (
        *(row[i] for i in range(4)),  # id, session_id, channel, conversation_key
        tuple(json.loads(event_ids)),
        json.loads(placeholder) if placeholder else None,
        *(row[i] for i in range(6, 12)),  # status ... resume_attempts
        tuple(json.loads(shown)) if shown else (),
        parts_from_json(row[13]),  # final_parts
    )


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


def chat_from_record(record: Mapping[str, Any]) -> ChatRef | None:
    """The chat of a handle record or of a `chat_record`; None for an old partial record."""
    if "channel" not in record or "chat_id" not in record:
        return None
    return ChatRef(
        record["channel"], record["chat_id"], record.get("thread_id"), record.get("team_id")
    )


def handle_from_record(record: Mapping[str, Any]) -> MessageHandle | None:
    """The handle back; None for a record from before handles were stored whole, or for a
    `chat_record` (the placeholder was not posted, or its id not learned)."""
    chat = chat_from_record(record)
    if chat is None or "message_id" not in record:
        return None
    return MessageHandle(chat, record["message_id"], record.get("data") or {})
