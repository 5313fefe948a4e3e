"""Knowledge tools: `search_knowledge` (passages, sources, memories) and `check_off_topic`."""

from __future__ import annotations

from typing import Any

from tools.base import ToolContext
from tools.knowledge import KnowledgeBase, unique_terms
from tools.memory import MemoryStore, relevant, user_rows
from tools.registry import tool

NO_KNOWLEDGE = (
    "No knowledge base is configured here. Answer from general knowledge, say that you could "
    "not check the knowledge base, and do not cite sources."
)


def knowledge_base(ctx: ToolContext) -> KnowledgeBase | None:
    found = ctx.deps.knowledge
    return found if found is not None and found.documents else None


async def _memories(ctx: ToolContext, query: str) -> list[str]:
    if not isinstance(ctx.storage, MemoryStore):
        return []
    return [row.content for row in relevant(await user_rows(ctx), query)]


@tool(read_only=True, open_world=False)
async def search_knowledge(
    ctx: ToolContext, query: str, category: str | None = None
) -> dict[str, Any]:
    """Search the knowledge base for passages that answer a question; cite the sources returned.

    Args:
        query: the question or its key words.
        category: limit the search to one category (a knowledge sub-folder or a document's
            `category`), when the question is clearly about it.
    """
    user_context = await _memories(ctx, query)
    kb = knowledge_base(ctx)
    if kb is None:
        return {
            "success": False,
            "passages": [],
            "sources": [],
            "user_context": user_context,
            "message": NO_KNOWLEDGE,
        }
    hits = await kb.search(query, category=category)
    note = ""
    if not hits and category:
        hits = await kb.search(query)
        note = f" Nothing in category {category!r}; these come from all categories."
    passages = [
        {"title": h.title, "section": h.heading, "text": h.text, "source": i}
        for i, h in enumerate(hits, start=1)
    ]
    sources = [{"title": h.title, "path": h.path, "score": h.score} for h in hits]
    message = (
        f"{len(hits)} passages found.{note} Answer from them and cite titles."
        if hits
        else "Nothing in the knowledge base matches. Say so rather than guessing."
    )
    return {
        "success": bool(hits),
        "passages": passages,
        "sources": sources,
        "user_context": user_context,
        "message": message,
    }


def _overlap(question: list[str], domain: set[str]) -> list[str]:
    """Question terms that are domain terms, allowing a plural or suffix ('visas' ~ 'visa')."""
    return [
        t
        for t in question
        if t in domain
        or (len(t) >= 4 and any(d.startswith(t) or t.startswith(d) for d in domain if len(d) >= 4))
    ]


@tool(read_only=True, open_world=False)
async def check_off_topic(ctx: ToolContext, question: str) -> dict[str, Any]:
    """Check whether a question is inside this bot's subject, before answering something unrelated.

    Args:
        question: the user's question, as they wrote it.
    """
    config = ctx.deps.settings.off_topic
    asked = unique_terms(question)
    domain = set(unique_terms(" ".join([config.topic, *config.keywords])))
    kb = knowledge_base(ctx)
    undecided = {"is_off_topic": False, "confidence": 0.0, "suggestion": ""}
    if not domain and kb is None:
        return undecided | {"reason": "no topic or knowledge is configured, so anything goes"}
    if not asked:
        return undecided | {"reason": "the question has no words to judge it by"}
    matched = set(_overlap(asked, domain))
    if kb is not None:
        matched.update((await kb.coverage(question))[0])
    if matched:
        confidence = round(min(0.95, 0.5 + 0.5 * len(matched) / len(asked)), 2)
        return {
            "is_off_topic": False,
            "confidence": confidence,
            "suggestion": "",
            "reason": f"it mentions {sorted(matched)[:5]}",
        }
    if len(asked) < 2:
        return undecided | {"reason": "too little to go on; treat it as on topic"}
    topic = config.topic or "this assistant's subject"
    return {
        "is_off_topic": True,
        "confidence": round(min(0.9, 0.5 + 0.1 * len(asked)), 2),
        "suggestion": config.suggestion.replace("{topic}", topic),
        "reason": "none of its words appear in the topic description or the knowledge base",
    }
