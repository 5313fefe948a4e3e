"""`bot sessions`: what admins read — recent sessions, and one session's tree with every tool call."""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass, field

from bot.storage.roles import AdminViewRecords
from bot.storage.rows import AuditRow, MessageRow, SessionRow, TurnRow

PREVIEW = 160
# Bidirectional overrides and isolates: they make a terminal show text in another order.
BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


async def list_sessions(store: AdminViewRecords, limit: int) -> str:
    rows = await store.recent_sessions(limit=limit)
    if not rows:
        return "no sessions yet"
    lines = [f"{'id':12}  {'updated (UTC)':19}  {'status':9}  {'agent':10}  conversation"]
    for row in rows:
        lines.append(
            f"{row.id[:12]}  {_when(row.updated_at)}  {row.status:9}  "
            f"{row.agent_id:10}  {row.conversation_key}  (user {row.user_id})"
        )
    return "\n".join(_printable(line) for line in lines)


@dataclass
class CallNode:
    """One tool call (its audit row) and the specialist sessions it started."""

    call: AuditRow
    children: list[SessionNode] = field(default_factory=list)


@dataclass
class SessionNode:
    """A session with its messages, turns and tool calls, each child under the call that
    started it; `orphans` are children no call's result names (a dispatch cut off, say)."""

    session: SessionRow
    messages: list[MessageRow]
    turns: list[TurnRow]
    calls: list[CallNode]
    orphans: list[SessionNode]

    @property
    def failed_turns(self) -> set[str]:
        return {t.id for t in self.turns if t.status == "failed"}


async def find_session(store: AdminViewRecords, session_id: str) -> SessionRow:
    """The session with this id, or the one whose id starts with it; LookupError otherwise."""
    session = await store.get_session(session_id)
    if session is None:
        matches = await store.find_sessions(session_id)
        if len(matches) != 1:
            known = ", ".join(m.id[:12] for m in matches) or "none"
            raise LookupError(
                f"no session {session_id!r} (matches: {known}); see `bot sessions list`"
            )
        session = matches[0]
    return session


async def session_tree(store: AdminViewRecords, session: SessionRow) -> SessionNode:
    """The tree `bot sessions show` prints and the admin view renders."""
    children = {c.id: c for c in await store.child_sessions(session.id)}
    calls: list[CallNode] = []
    for call in await store.audit_for_session(session.id):
        node = CallNode(call)
        for child_id in [c for c in children if c in (call.result or "")]:
            node.children.append(await session_tree(store, children.pop(child_id)))
        calls.append(node)
    return SessionNode(
        session,
        await store.messages_for_session(session.id),
        await store.turns_for_session(session.id),
        calls,
        [await session_tree(store, child) for child in children.values()],
    )


async def show_session(store: AdminViewRecords, session_id: str) -> str:
    """The session, each tool call in order, and each child session nested under it."""
    tree = await session_tree(store, await find_session(store, session_id))
    lines: list[str] = []
    _render(tree, lines, depth=0)
    return "\n".join(_printable(line) for line in lines)


def _render(node: SessionNode, lines: list[str], depth: int) -> None:
    pad = "    " * depth
    session = node.session
    lines.append(
        f"{pad}{'└─ ' if depth else ''}session {session.id}  agent={session.agent_id}  "
        f"status={session.status}  persona={session.persona_version or '-'}"
    )
    lines.append(
        f"{pad}   {session.conversation_key}  user={session.user_id}  "
        f"created={_when(session.created_at)}  messages={len(node.messages)}"
    )
    if not node.calls:
        lines.append(f"{pad}   (no tool calls)")
    # the conversation and the tool calls, in the order they happened; a tool message is its
    # call's result, shown under the call
    said: list[tuple[str, MessageRow | CallNode]] = [
        (m.created_at or "", m) for m in node.messages if m.role != "tool"
    ]
    said += [(c.call.created_at or "", c) for c in node.calls]
    for _, item in sorted(said, key=lambda pair: pair[0]):
        if isinstance(item, CallNode):
            _render_call(item, lines, pad, depth)
        else:
            text = item.content or ("(tool calls)" if item.tool_calls else "")
            lines.append(f"{pad}   {(item.created_at or '')[11:23]}  {item.role}: {_short(text)}")
    for child in node.orphans:
        _render(child, lines, depth + 1)


def _render_call(item: CallNode, lines: list[str], pad: str, depth: int) -> None:
    call = item.call
    mark = "ok " if call.ok else "ERR"
    lines.append(
        f"{pad}   {(call.created_at or '')[11:23]}  {mark}  {call.tool_name}"
        f"({_short(call.arguments)})  {call.duration_ms or 0:.0f} ms"
    )
    lines.append(f"{pad}       → {_short(call.result)}")
    for child in item.children:
        _render(child, lines, depth + 1)


def _when(stamp: str | None) -> str:
    """An ISO timestamp to the second, as admins read it."""
    return (stamp or "")[:19].replace("T", " ")


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
