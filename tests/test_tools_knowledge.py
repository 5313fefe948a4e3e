"""The knowledge index (FTS5, BM25, live re-index) and the search and off-topic tools."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.storage import SqliteStore
from tests.tools_kit import call_json, context, settings
from tools.knowledge import KnowledgeBase, Refresh, terms
from tools.knowledge.passages import parse_document

DOCS = {
    "talent/eligibility.md": "---\ncategory: TALENT\n---\n# Talent Visa eligibility\n\n"
    "Applicants must be at least 18 years old and hold a degree.\n\n"
    "## Points test\n\nApplicants need 80 points. Work experience gives 15 points per year.\n\n"
    "## 人才签证申请条件\n\n申请人须年满18岁，持有学士学位。\n",
    "fees.md": "# Fees and processing times\n\nThe Talent Visa fee is 300 USD.\n\n"
    "## Processing\n\nDecisions take about eight weeks.\n",
    "graduate/stay.md": "# Graduate Stay\n\nGraduates may stay 24 months to look for work.\n",
}


def write_docs(root: Path, docs: dict[str, str] = DOCS) -> Path:
    for name, text in docs.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.fixture
async def kb(tmp_path: Path) -> AsyncIterator[KnowledgeBase]:
    base = KnowledgeBase([write_docs(tmp_path / "kb"), tmp_path / "missing"], max_results=3)
    await base.open()
    yield base
    await base.close()


def test_terms_and_passages() -> None:
    assert terms("What are the Visa fees? 签证费用") == ["visa", "fees", "签证", "证费", "费用"]
    doc = parse_document(Path("talent-visa.md"), DOCS["talent/eligibility.md"], limit=200)
    assert (doc.title, doc.category) == ("Talent Visa eligibility", "TALENT")
    assert [p.heading for p in doc.passages] == ["", "Points test", "人才签证申请条件"]
    long = parse_document(Path("long_notes.md"), "\n\n".join(["word " * 60] * 4), limit=200)
    assert long.title == "Long notes" and all(len(p.text) <= 200 for p in long.passages)
    assert len(long.passages) >= 6


async def test_search_ranks_passages_with_sources(kb: KnowledgeBase) -> None:
    assert (kb.documents, kb.passages) == (3, 6)
    hits = await kb.search("how many points do applicants need")
    assert hits[0].heading == "Points test" and hits[0].path == "talent/eligibility.md"
    assert hits[0].score > 0 and [h.score for h in hits] == sorted(
        (h.score for h in hits), reverse=True
    )
    assert (await kb.search("visa fee"))[0].title == "Fees and processing times"
    assert (await kb.search("申请条件"))[0].heading == "人才签证申请条件"
    in_talent = await kb.search("visa", category="talent")  # the title is in every passage's head
    assert [h.path for h in in_talent] == ["talent/eligibility.md"] * 3
    assert await kb.search("the of and") == [] and await kb.search("zebra") == []
    matched, asked = await kb.coverage("weekend weather for graduates")
    assert (matched, asked) == (["graduates"], ["weekend", "weather", "graduates"])


async def test_the_index_lives_on_its_own_thread(kb: KnowledgeBase) -> None:
    seen: list[int] = []
    assert kb._executor is not None
    await asyncio.get_running_loop().run_in_executor(
        kb._executor, lambda: seen.append(threading.get_ident())
    )
    assert seen[0] != threading.get_ident()


async def test_files_are_reindexed_when_they_change(tmp_path: Path) -> None:
    root = write_docs(tmp_path / "kb")
    base = KnowledgeBase([root])
    await base.open()
    updates: asyncio.Queue[Refresh] = asyncio.Queue()
    base.subscribe(updates.put_nowait)
    watcher = asyncio.create_task(base.watch())
    try:
        async with asyncio.timeout(10):
            await base.watching.wait()
            (root / "graduate" / "stay.md").write_text(
                "# Graduate Stay\n\nNow 36 months of zebra time.\n"
            )
            (root / "fees.md").unlink()
            while (await base.search("zebra")) == [] or await base.search("fee"):
                await updates.get()
        assert base.documents == 2
        assert (await base.search("zebra"))[0].text == "Now 36 months of zebra time."
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        await base.close()


async def test_search_knowledge_tool_returns_passages_sources_and_memories(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    async with SqliteStore(tmp_path / "bot.db") as store:
        own = context(user="u1", storage=store, knowledge=kb)
        await call_json(
            "save_user_memory",
            {"memory_type": "FACT", "content": "Has 6 years of work experience"},
            own,
        )
        other = context(user="u2", storage=store, knowledge=kb)
        await call_json(
            "save_user_memory",
            {"memory_type": "FACT", "content": "Has 2 years of work experience"},
            other,
        )
        data = await call_json("search_knowledge", {"query": "points for work experience"}, own)
        assert data["success"] is True
        assert data["sources"][0] == {
            "title": "Talent Visa eligibility",
            "path": "talent/eligibility.md",
            "score": data["sources"][0]["score"],
        }
        assert (
            data["passages"][0]["section"] == "Points test" and data["passages"][0]["source"] == 1
        )
        assert data["user_context"] == ["Has 6 years of work experience"]
        narrowed = await call_json(
            "search_knowledge", {"query": "months", "category": "TALENT"}, own
        )
        assert narrowed["sources"][0]["path"] == "graduate/stay.md"
        assert "Nothing in category 'TALENT'" in narrowed["message"]


async def test_search_knowledge_without_a_knowledge_base_says_so() -> None:
    data = await call_json("search_knowledge", {"query": "visa"}, context())
    assert data == {
        "success": False,
        "passages": [],
        "sources": [],
        "user_context": [],
        "message": data["message"],
    }
    assert "No knowledge base is configured" in data["message"]


async def test_check_off_topic(kb: KnowledgeBase) -> None:
    config = settings(
        off_topic={"topic": "visas and moving to Avalon", "keywords": ["immigration"]}
    )
    ctx = context(config=config, knowledge=kb)
    on = await call_json(
        "check_off_topic", {"question": "Can I bring my family on a skilled visa?"}, ctx
    )
    assert on["is_off_topic"] is False and on["confidence"] >= 0.5
    kb_only = await call_json(
        "check_off_topic", {"question": "How long are processing times?"}, ctx
    )
    assert kb_only["is_off_topic"] is False
    off = await call_json(
        "check_off_topic", {"question": "Recommend a good pizza recipe with mushrooms"}, ctx
    )
    assert off["is_off_topic"] is True and 0.5 < off["confidence"] <= 0.9
    assert off["suggestion"].startswith(
        "That seems outside what I can help with here (visas and moving"
    )
    short = await call_json("check_off_topic", {"question": "pizza?"}, ctx)
    assert short["is_off_topic"] is False and short["confidence"] == 0.0
    nothing_configured = await call_json(
        "check_off_topic", {"question": "Recommend a pizza recipe"}, context()
    )
    assert (
        nothing_configured["is_off_topic"] is False
        and "anything goes" in nothing_configured["reason"]
    )
