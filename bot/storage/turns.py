"""Turns: the gateway's record of each reply, its inbound events, placeholder and outcome."""

from __future__ import annotations

import json
from typing import Any

from bot.storage.connection import StoreConnection
from bot.storage.schema import TURN_STATUSES, check_status, insert_sql, now

_INSERT_TURN = insert_sql(
    "turns",
    "id session_id channel conversation_key inbound_event_ids placeholder status created_at",
)
_SET_PLACEHOLDER = "UPDATE turns SET placeholder = ? WHERE id = ?"
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
    ) -> None:
        check_status(status, TURN_STATUSES, "turn")
        turn = (turn_id, session_id, channel, conversation_key)
        await self._run(self._create_turn_db, turn, inbound_event_ids, placeholder, status)

    async def update_turn_placeholder(self, turn_id: str, placeholder: dict[str, Any]) -> None:
        await self._run(self._update, _SET_PLACEHOLDER, (json.dumps(placeholder), turn_id), "turn")

    async def finish_turn(
        self, turn_id: str, *, status: str, final_text: str | None = None, error: str | None = None
    ) -> None:
        check_status(status, TURN_STATUSES, "turn")
        await self._run(
            self._update, _FINISH_TURN, (status, final_text, error, now(), turn_id), "turn"
        )

    async def fail_unfinished_turns(self, reason: str) -> int:
        """Mark turns left `running` by a process that stopped mid-turn; how many there were.

        Only for a store no other gateway process shares: theirs may be running for real.
        """
        return await self._run(self._fail_unfinished_db, reason)

    async def get_turn(self, turn_id: str) -> dict[str, Any] | None:
        turn = await self._one("SELECT * FROM turns WHERE id = ?", turn_id)
        if turn is not None:
            turn["inbound_event_ids"] = json.loads(turn["inbound_event_ids"])
            turn["placeholder"] = json.loads(turn["placeholder"]) if turn["placeholder"] else None
        return turn

    # -- the SQL, one short transaction each --------------------------------------------
    def _create_turn_db(
        self,
        turn: tuple[str, str, str, str],
        inbound_event_ids: list[str],
        placeholder: dict[str, Any] | None,
        status: str,
    ) -> None:
        handle = None if placeholder is None else json.dumps(placeholder)
        row = (*turn, json.dumps(inbound_event_ids), handle, status, now())
        self._conn.execute(_INSERT_TURN, row)

    def _fail_unfinished_db(self, reason: str) -> int:
        sql = "UPDATE turns SET status = 'failed', error = ?, finished_at = ? WHERE status = 'running'"
        return self._conn.execute(sql, (reason, now())).rowcount
