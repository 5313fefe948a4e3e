"""`bot sessions`: what admins read — recent sessions, and one session's tree with every tool call."""

from __future__ import annotations

import json
import unicodedata
from typing import Any, Protocol

PREVIEW = 160
# Bidirectional overrides and isolates: they make a terminal show text in another order.
BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


class SessionRows(Protocol):
    """The admin views this reads; SqliteStore and PostgresStore both have them."""

    async def recent_sessions(self, *, limit: int = 20) -> list[dict[str, Any]]: ...
    async def get_session(self, session_id: str) -> dict[str, Any] | None: ...
    async def find_sessions(self, prefix: str) -> list[dict[str, Any]]: ...
    async def messages_for_session(self, session_id: str) -> list[dict[str, Any]]: ...
    async def child_sessions(self, session_id: str) -> list[dict[str, Any]]: ...
    async def audit_for_session(self, session_id: str) -> list[dict[str, Any]]: ...


async def list_sessions(store: SessionRows, limit: int) -> str:
    rows = await store.recent_sessions(limit=limit)
    if not rows:
        return "no sessions yet"
    lines = [f"{'id':12}  {'updated (UTC)':19}  {'status':9}  {'agent':10}  conversation"]
    for row in rows:
        lines.append(
            f"{row['id'][:12]}  {row['updated_at'][:19].replace('T', ' ')}  {row['status']:9}  "
            f"{row['agent_id']:10}  {row['conversation_key']}  (user {row['user_id']})"
        )
    return "\n".join(_printable(line) for line in lines)


async def show_session(store: SessionRows, session_id: str) -> str:
    """The session, each tool call in order, and each child session nested under it."""
    session = await store.get_session(session_id)
    if session is None:
        matches = await store.find_sessions(session_id)
        if len(matches) != 1:
            known = ", ".join(m["id"][:12] for m in matches) or "none"
            raise LookupError(
                f"no session {session_id!r} (matches: {known}); see `bot sessions list`"
            )
        session = matches[0]
    lines: list[str] = []
    await _render(store, session, lines, depth=0)
    return "\n".join(_printable(line) for line in lines)


async def _render(
    store: SessionRows, session: dict[str, Any], lines: list[str], depth: int
) -> None:
    pad = "    " * depth
    messages = await store.messages_for_session(session["id"])
    lines.append(
        f"{pad}{'└─ ' if depth else ''}session {session['id']}  agent={session['agent_id']}  "
        f"status={session['status']}  persona={session['persona_version'] or '-'}"
    )
    lines.append(
        f"{pad}   {session['conversation_key']}  user={session['user_id']}  "
        f"created={session['created_at'][:19].replace('T', ' ')}  messages={len(messages)}"
    )
    children = {c["id"]: c for c in await store.child_sessions(session["id"])}
    calls = await store.audit_for_session(session["id"])
    if not calls:
        lines.append(f"{pad}   (no tool calls)")
    for call in calls:
        mark = "ok " if call["ok"] else "ERR"
        lines.append(
            f"{pad}   {call['created_at'][11:23]}  {mark}  {call['tool_name']}({_short(call['arguments'])})"
            f"  {call['duration_ms']:.0f} ms"
        )
        lines.append(f"{pad}       → {_short(call['result'])}")
        for child_id in [c for c in children if c in (call["result"] or "")]:
            await _render(store, children.pop(child_id), lines, depth + 1)
    for child in children.values():  # e.g. a dispatch whose result was cut off
        await _render(store, child, lines, depth + 1)


def _printable(line: str) -> str:
    """Control characters escaped: user ids, chat keys and tool arguments come from users, and
    raw they could retitle, clear or rewrite the admin's terminal, or forge a line."""
    return "".join(_escape(c) if c in BIDI or unicodedata.category(c) == "Cc" else c for c in line)


def _escape(char: str) -> str:
    return repr(char)[1:-1] if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def _short(text: str | None) -> str:
    text = (text or "").replace("\n", " ")
    try:
        text = json.dumps(json.loads(text), ensure_ascii=False)
    except ValueError:
        pass
    return text if len(text) <= PREVIEW else text[: PREVIEW - 1] + "…"
