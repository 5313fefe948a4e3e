"""User memories as tools see them: the storage protocol, and how memories are ranked for a query.

Every read and write is scoped by the caller's identity from `ToolContext` (tenant + user id);
no tool takes a user id as an argument, so no argument can reach another user's memories.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from tools.base import ToolContext, ToolError
from tools.knowledge.terms import unique_terms

MemoryType = Literal["FACT", "PREFERENCE", "INTENT"]
IMPORTANCE: dict[str, int] = {"FACT": 70, "PREFERENCE": 60, "INTENT": 80}
RELEVANT_LIMIT = 3
IMPORTANT_LIMIT = 5


class Memory(Protocol):
    """A stored memory as the tools read it (the gateway's store: `bot.storage.rows.MemoryRow`)."""

    @property
    def id(self) -> int: ...

    @property
    def memory_type(self) -> str | None: ...

    @property
    def content(self) -> str: ...

    @property
    def category(self) -> str | None: ...

    @property
    def importance(self) -> int | None: ...

    @property
    def key(self) -> str | None: ...


@runtime_checkable
class MemoryStore(Protocol):
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
        """Insert, or update the memory with the same `key` (or the same content); its id."""
        ...

    async def list_memories(
        self, *, tenant: str, user_id: str, limit: int = 200
    ) -> Sequence[Memory]:
        """The user's memories, most important and newest first."""
        ...


@runtime_checkable
class OrderStore(Protocol):
    async def create_order(self, order: Mapping[str, Any]) -> None: ...


def memory_store(ctx: ToolContext) -> MemoryStore:
    if not isinstance(ctx.storage, MemoryStore):
        raise ToolError("memory is not available in this deployment (no storage is attached)")
    return ctx.storage


async def remember(
    ctx: ToolContext,
    memory_type: str,
    content: str,
    *,
    category: str | None = None,
    importance: int | None = None,
    key: str | None = None,
) -> int:
    """Save a memory for the calling user; importance by type unless given."""
    return await memory_store(ctx).save_memory(
        tenant=ctx.tenant or "",
        user_id=ctx.user_id,
        memory_type=memory_type,
        content=" ".join(content.split()),
        category=category,
        importance=importance if importance is not None else IMPORTANCE[memory_type],
        key=key,
    )


def _view(row: Memory) -> dict[str, Any]:
    view: dict[str, Any] = {
        "type": row.memory_type,
        "content": row.content,
        "importance": row.importance,
    }
    if row.category:
        view["category"] = row.category
    return view


def relevant(rows: Iterable[Memory], query: str, limit: int = RELEVANT_LIMIT) -> list[Memory]:
    """Memories that share words with `query`, best first (shared words, then importance)."""
    wanted = set(unique_terms(query))
    if not wanted:
        return []
    scored = []
    for row in rows:
        have = set(unique_terms(f"{row.content} {row.category or ''}"))
        shared = len(wanted & have)
        if shared:
            scored.append((shared / math.sqrt(len(have)), row.importance or 0, row))
    scored.sort(key=lambda s: (s[0], s[1]), reverse=True)
    return [row for _, _, row in scored[:limit]]


def context_for(rows: Sequence[Memory], query: str) -> list[dict[str, Any]]:
    """The relevant memories, then the most important ones, without repeats."""
    important = sorted(rows, key=lambda r: r.importance or 0, reverse=True)[:IMPORTANT_LIMIT]
    picked: dict[int, Memory] = {}
    for row in [*relevant(rows, query), *important]:
        picked.setdefault(row.id, row)
    seen: set[str] = set()
    out = []
    for row in picked.values():
        text = " ".join(str(row.content).lower().split())
        if text not in seen:
            seen.add(text)
            out.append(_view(row))
    return out


async def user_rows(ctx: ToolContext) -> Sequence[Memory]:
    return await memory_store(ctx).list_memories(tenant=ctx.tenant or "", user_id=ctx.user_id)
