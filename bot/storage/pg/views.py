"""Read-only views on PostgreSQL for admins and reports: the same rows as SqliteStore's views."""

from __future__ import annotations

from typing import Any

from bot.storage.pg.connection import PgConnection


class PgAdminViews(PgConnection):
    """Raw rows, as dicts, for the sessions view, the CLI and tests."""

    async def get_session(self, session_id: str) -> dict[str, Any] | None:
        return await self._one("SELECT * FROM chat_sessions WHERE id = $1", session_id)

    async def child_sessions(self, session_id: str) -> list[dict[str, Any]]:
        sql = "SELECT * FROM chat_sessions WHERE parent_session_id = $1 ORDER BY seq"
        return await self._select(sql, session_id)

    async def audit_for_session(self, session_id: str) -> list[dict[str, Any]]:
        return await self._select(
            "SELECT * FROM audit_logs WHERE session_id = $1 ORDER BY id", session_id
        )

    async def messages_for_session(self, session_id: str) -> list[dict[str, Any]]:
        return await self._select(
            "SELECT * FROM messages WHERE session_id = $1 ORDER BY id", session_id
        )

    async def recent_sessions(
        self, *, limit: int = 20, root_only: bool = True
    ) -> list[dict[str, Any]]:
        """The newest sessions first (coordinator sessions only, unless `root_only` is False)."""
        where = "WHERE parent_session_id IS NULL" if root_only else ""
        sql = f"SELECT * FROM chat_sessions {where} ORDER BY updated_at DESC, seq DESC LIMIT $1"
        return await self._select(sql, limit)

    async def find_sessions(self, prefix: str) -> list[dict[str, Any]]:
        """Sessions whose id starts with `prefix` (admins type short ids)."""
        sql = "SELECT * FROM chat_sessions WHERE id LIKE $1 ORDER BY seq LIMIT 10"
        return await self._select(sql, prefix.replace("%", "").replace("_", "") + "%")

    async def usage_for_session(self, session_id: str) -> list[dict[str, Any]]:
        return await self._select(
            "SELECT * FROM usage WHERE session_id = $1 ORDER BY id", session_id
        )

    async def turn_usage(self, turn_id: str) -> dict[str, Any]:
        """A turn's totals: model calls, input and output tokens (all providers of a fallback)."""
        sql = (
            "SELECT count(*) AS model_calls, coalesce(sum(input_tokens), 0) AS input_tokens,"
            " coalesce(sum(output_tokens), 0) AS output_tokens FROM usage WHERE turn_id = $1"
        )
        [totals] = await self._select(sql, turn_id)
        return totals
