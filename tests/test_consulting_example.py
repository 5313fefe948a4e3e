"""The consulting example pack loads, validates and answers from its knowledge in a running app."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from aiohttp import ClientSession

from agent.personas import PersonaLibrary
from agent.providers.scripted import Reply, ScriptedProvider
from bot.runtime.config import load_config
from tests.conftest import Running, connect
from tools.builtin import builtin_registry
from tools.control import CONTROL
from tools.knowledge import KnowledgeBase, Refresh

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "consulting"


async def test_the_example_config_personas_and_knowledge_are_valid() -> None:
    config = load_config(EXAMPLE / "config.yaml", env={})
    assert config.personas.dirs == ["personas"] and config.knowledge.dirs == ["knowledge"]
    registry = builtin_registry(config.tools.intake)
    known = registry.names() + [c.name for c in CONTROL]
    library = PersonaLibrary([EXAMPLE / d for d in config.personas.dirs], known_tools=known)
    assert library.check() == []
    library.load()
    assert sorted(library.all()) == [
        "default",
        "specialist-costs",
        "specialist-intake",
        "specialist-research",
    ]
    intake = registry.get("collect_info")
    assert intake is not None and "programme" in intake.spec.parameters["properties"]
    kb = KnowledgeBase([EXAMPLE / d for d in config.knowledge.dirs])
    await kb.open()
    try:
        hits = await kb.search("how many points does the talent visa need")
        assert hits[0].title == "Talent Visa eligibility" and hits[0].category == "TALENT"
    finally:
        await kb.close()


async def test_a_running_app_searches_its_knowledge_and_follows_edits(
    running: Running, session: ClientSession, tmp_path: Path
) -> None:
    docs = tmp_path / "kb"
    docs.mkdir()
    (docs / "hours.md").write_text("# Opening hours\n\nThe office opens at nine.\n")
    folder = tmp_path / "personas"
    folder.mkdir()
    (folder / "default.md").write_text(
        "---\nname: default\ndescription: Answers from the knowledge.\n"
        "tools: [search_knowledge]\n---\nAnswer.\n"
    )
    provider = ScriptedProvider(
        [
            Reply(calls=[("search_knowledge", {"query": "when does the office open"})]),
            Reply("At nine."),
            Reply(calls=[("search_knowledge", {"query": "parking"})]),
            Reply("Level B2."),
        ]
    )
    app = await running(provider, personas={"dirs": [str(folder)]}, knowledge={"dirs": [str(docs)]})
    client = await connect(session, app)
    await client.hello()
    await client.ask("When do you open?")
    (seen,) = [m for m in provider.requests[1].messages if m.role == "tool"]
    assert json.loads(seen.content)["sources"][0]["path"] == "hours.md"

    updates: asyncio.Queue[Refresh] = asyncio.Queue()
    app.knowledge.subscribe(updates.put_nowait)
    async with asyncio.timeout(10):
        await app.knowledge.watching.wait()
        (docs / "parking.md").write_text("# Parking\n\nVisitors park on level B2.\n")
        while not await app.knowledge.search("parking"):
            await updates.get()
    await client.ask("Where can I park?")
    latest = provider.requests[3].messages[-1]  # history holds the first turn's tool call too
    assert latest.role == "tool"
    assert json.loads(latest.content)["passages"][0]["text"] == "Visitors park on level B2."
