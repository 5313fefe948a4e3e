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

    async def turns_for_session(self, session_id: str) -> list[dict[str, Any]]:
        sql = "SELECT * FROM turns WHERE session_id = $1 ORDER BY created_at, seq"
        return await self._select(sql, session_id)

    async def conversations(
        self, *, channel: str | None = None, user_id: str | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        """Coordinator sessions, newest first, with how many of their turns failed."""
        where = ["parent_session_id IS NULL"]
        params: list[Any] = []
        for column, value in (("channel", channel), ("user_id", user_id)):
            if value:
                params.append(value)
                where.append(f"{column} = ${len(params)}")
        params.append(limit)
        sql = (
            "SELECT s.*, (SELECT count(*) FROM turns t WHERE t.session_id = s.id"
            " AND t.status = 'failed') AS failed_turns FROM chat_sessions s"
            f" WHERE {' AND '.join(where)} ORDER BY updated_at DESC, seq DESC LIMIT ${len(params)}"
        )
        return await self._select(sql, *params)

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

    async def usage_totals(self, since: str | None = None) -> list[dict[str, Any]]:
        """Model calls and tokens per day (UTC), channel, user and model, since a date or ever."""
        sql = (
            "SELECT substr(u.created_at, 1, 10) AS day, coalesce(s.channel, '-') AS channel,"
            " coalesce(s.user_id, '-') AS user_id, coalesce(u.model, '-') AS model,"
            " count(*) AS calls, coalesce(sum(u.input_tokens), 0) AS input_tokens,"
            " coalesce(sum(u.output_tokens), 0) AS output_tokens"
            " FROM usage u LEFT JOIN chat_sessions s ON s.id = u.session_id"
            " WHERE u.created_at >= $1 GROUP BY 1, 2, 3, 4"
        )
        return await self._select(sql, since or "")
