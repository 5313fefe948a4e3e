"""A running app with the admin view on, after one turn with a specialist and one failed turn."""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from aiohttp import ClientSession

from agent.providers.scripted import Reply, ScriptedProvider
from bot.runtime.app import App
from tests.agents_kit import TASK, Probe, Router, dispatch, registry_with, write_personas
from tests.conftest import Running, connect, db_rows, settled

TOKEN = "admin-test-token-7f3a"
SCRIPT = "<script>window.pwned = 1</script>"
QUESTION = f"Who flew on Apollo 11? {SCRIPT}"


@dataclass
class Scene:
    app: App
    root_session: str
    worker_session: str
    failed_turn: str


async def admin_scene(running: Running, session: ClientSession, tmp_path: Path) -> Scene:
    folder = write_personas(tmp_path / "personas")
    (folder / "broken.md").write_text("---\nname: other\ndescription: x\n---\nbody\n")
    router = Router(
        default=[
            Reply(calls=[dispatch("specialist-a", TASK, description="moon crew")]),
            Reply("Armstrong, Aldrin and Collins. <img src=x onerror=alert(1)>"),
        ],  # the second message finds no reply left: its turn fails
        specialist_a=[
            Reply(calls=[("lookup", {"query": "apollo 11 crew"})]),
            Reply("Crew: Armstrong, Aldrin, Collins"),
        ],
    )
    app = await running(
        ScriptedProvider(router),
        registry=registry_with(Probe()),
        personas={"dirs": [str(folder)]},
        admin={"token": TOKEN},
    )
    client = await connect(session, app)
    await client.hello()
    await client.ask(QUESTION)
    await client.ask("and now fail please")
    await settled(app)
    [(root, worker)] = db_rows(
        app, "select parent_session_id, id from chat_sessions where agent_id = 'specialist-a'"
    )
    [(failed,)] = db_rows(app, "select id from turns where status = 'failed'")
    return Scene(app, root, worker, failed)


VOID = frozenset({"br", "hr", "img", "input", "link", "meta"})


class _Tree(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.sessions = 0  # open session sections around the current element
        self.found: list[tuple[str, str, int]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in VOID:
            return
        values = dict(attrs)
        if tag == "section" and values.get("data-session"):
            self.found.append(("session", values["data-session"] or "", self.sessions))
            self.sessions += 1
            self.stack.append("session")
            return
        if tag == "li" and values.get("data-tool"):
            self.found.append(("call", values["data-tool"] or "", self.sessions - 1))
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        top = self.stack.pop()
        if top == "session":
            self.sessions -= 1
            top = "section"
        assert top == tag, f"</{tag}> closes <{top}>"


def tree_in_html(html: str) -> list[tuple[str, str, int]]:
    """Sessions and tool calls in document order with their nesting depth: ("session", id, 0),
    ("call", tool name, depth of its session)."""
    parser = _Tree()
    parser.feed(html)
    return parser.found


def tree_in_text(text: str) -> list[tuple[str, str, int]]:
    """The same from `bot sessions show`, whose depth is its indent (four spaces a level)."""
    out: list[tuple[str, str, int]] = []
    for line in text.splitlines():
        depth = (len(line) - len(line.lstrip(" "))) // 4
        if session := re.search(r"session (\w+)  agent=", line):
            out.append(("session", session.group(1), depth))
        elif call := re.match(r"\s+[\d:.]+  (?:ok |ERR)  (\w+)\(", line):
            out.append(("call", call.group(1), depth))
    return out
