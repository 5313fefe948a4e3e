"""Persona files: parsing errors at file:line, override dirs, check, and live reload."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import pytest

from agent.personas import (
    BUILTIN_DEFAULT,
    PersonaError,
    PersonaLibrary,
    parse_persona,
)

REPO = Path(__file__).resolve().parent.parent
TOOLS = {"web_search", "get_current_datetime"}


def persona_text(name: str, description: str = "Looks things up.", body: str = "You are X.") -> str:
    return (
        "---\n"
        f"name: {name}\n"
        f"description: {description}\n"
        "tools: [web_search, get_current_datetime]\n"
        "model: null\n"
        "max_rounds: 8\n"
        "---\n"
        f"{body}\n"
    )


def write(path: Path, text: str) -> None:
    """Write atomically, as editors do, so a reader never sees a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def test_parse_good_file() -> None:
    path = Path("personas/specialist-research.md")
    text = persona_text("specialist-research", body="\n  You are a researcher.\n\n")
    persona = parse_persona(path, text, known_tools=TOOLS)
    assert persona.name == "specialist-research"
    assert persona.description == "Looks things up."
    assert persona.tools == ("web_search", "get_current_datetime")
    assert (persona.model, persona.max_rounds) == (None, 8)
    assert persona.prompt == "You are a researcher."
    assert persona.path == path
    assert len(persona.version) == 12 and not persona.is_coordinator
    assert parse_persona(Path("default.md"), persona_text("default")).is_coordinator
    minimal = "---\nname: m\ndescription: d\ntools: []\n---\nbody"
    assert parse_persona(Path("m.md"), minimal).tools == ()


BAD = {
    "missing_front_matter": ("You are X.\n", 1, "missing front matter"),
    "unterminated": (
        "---\nname: bar\ndescription: d\ntools: []\nYou are X.\n",
        1,
        "the front matter is not terminated",
    ),
    "yaml_syntax": (
        "---\nname: bar\ntools: []\ndescription: a: b\n---\nbody\n",
        4,
        "invalid YAML in the front matter: mapping values are not allowed here",
    ),
    "unknown_key": (
        "---\nname: bar\ndescription: d\ntools: []\ntool: [x]\n---\nbody\n",
        5,
        "unknown key 'tool'; allowed: approve, description, display_description, display_name, language, max_rounds, model, name, suggestions, tools, welcome",
    ),
    "wrong_type": (
        "---\nname: bar\ndescription: d\ntools: []\nmax_rounds: lots\n---\nbody\n",
        5,
        "max_rounds 'lots' is invalid: input should be a valid integer",
    ),
    "out_of_range": (
        "---\nname: bar\nmax_rounds: 0\ndescription: d\ntools: []\n---\nbody\n",
        3,
        "max_rounds 0 is invalid: input should be greater than or equal to 1",
    ),
    "tools_not_list": (
        "---\nname: bar\ndescription: d\ntools: web_search\n---\nbody\n",
        4,
        "tools 'web_search' is invalid: input should be a valid list",
    ),
    "name_mismatch": (
        "---\ndescription: d\n\nname: foo\ntools: []\n---\nbody\n",
        4,
        "name 'foo' must equal the file name 'bar'",
    ),
    "missing_key": ("---\nname: bar\ndescription: d\n---\nbody\n", 1, "missing key 'tools'"),
    "empty_description": (
        "---\nname: bar\ndescription: '  '\ntools: []\n---\nbody\n",
        3,
        "description is empty",
    ),
    "long_description": (
        f"---\nname: bar\ndescription: {'x' * 201}\ntools: []\n---\nbody\n",
        3,
        "description is 201 characters long",
    ),
    "empty_body": (
        "---\nname: bar\ndescription: d\ntools: []\n---\n\n  \n",
        6,
        "the body is empty",
    ),
    "unknown_tool": (
        "---\nname: bar\ndescription: d\n\ntools:\n  - web_serch\n---\nbody\n",
        5,
        "unknown tool 'web_serch'; known: get_current_datetime, web_search; "
        "did you mean 'web_search'?",
    ),
    "unknown_language": (
        "---\nname: bar\ndescription: d\ntools: []\nlanguage: klingon\n---\nbody\n",
        5,
        "language 'klingon' has no texts; known: en, de, fr, zh",
    ),
    "not_a_mapping": (
        "---\n- a\n- b\n---\nbody\n",
        2,
        "the front matter must be 'key: value' lines, not a list",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_parse_errors_point_at_file_and_line(case: str) -> None:
    text, line, reason = BAD[case]
    path = Path("personas/bar.md")
    with pytest.raises(PersonaError) as info:
        parse_persona(path, text, known_tools=TOOLS)
    err = info.value
    assert (err.path, err.line) == (path, line)
    assert err.reason.startswith(reason), err.reason
    assert str(err) == f"{path}:{line}: {err.reason}"


def test_a_persona_may_set_the_language_of_the_gateways_texts() -> None:
    text = "---\nname: x\ndescription: d\ntools: []\nlanguage: de-CH\n---\nbody\n"
    assert parse_persona(Path("x.md"), text).language == "de"  # the tag, as one of ours
    assert parse_persona(Path("x.md"), persona_text("x")).language is None


def test_unknown_tool_is_fine_without_a_known_list() -> None:
    assert parse_persona(Path("x.md"), persona_text("x")).tools[0] == "web_search"


def test_tool_patterns_and_mcp_names_may_match_nothing_yet_but_names_must_be_known(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    known = {*TOOLS, "mcp__files__read", "mcp__files__write"}
    text = "---\nname: x\ndescription: d\ntools: [web_*, mcp__files__*, mcp__git__*]\n---\nbody\n"
    persona = parse_persona(Path("x.md"), text, known_tools=known)
    assert persona.tools == ("web_*", "mcp__files__*", "mcp__git__*")  # resolved per turn
    (warning,) = persona.warnings
    assert warning.startswith("x.md:4: tool pattern 'mcp__git__*' matches no tool now")
    # an MCP tool by name: its server may be down or still connecting, so a warning too
    named = parse_persona(
        Path("x.md"), text.replace("mcp__git__*", "mcp__git__log"), known_tools=known
    )
    assert named.tools[-1] == "mcp__git__log"
    assert named.warnings[0].startswith("x.md:4: MCP tool 'mcp__git__log' is not known now")
    with pytest.raises(PersonaError, match="unknown tool 'git_log'"):
        parse_persona(Path("x.md"), text.replace("mcp__git__*", "git_log"), known_tools=known)
    write(tmp_path / "x.md", text)
    library = PersonaLibrary([tmp_path], known_tools=known)
    with caplog.at_level(logging.WARNING, logger="agent.personas"):
        assert library.load() == []
    assert library.get("x").warnings == (warning.replace("x.md", str(tmp_path / "x.md")),)
    assert "tool pattern 'mcp__git__*' matches no tool now" in caplog.text


def test_shipped_default_persona_parses() -> None:
    path = REPO / "personas" / "default.md"
    tools = ("get_current_datetime", "schedule_message", "list_schedules", "cancel_schedule")
    persona = parse_persona(path, path.read_text("utf-8"), known_tools=set(tools))
    assert persona.is_coordinator and persona.tools == tools
    assert "Dispatch policy" in persona.prompt


def test_override_dirs_file_by_file(tmp_path: Path) -> None:
    base, site = tmp_path / "base", tmp_path / "site"
    write(base / "default.md", persona_text("default", "Base coordinator."))
    write(base / "research.md", persona_text("research", "Base research."))
    write(site / "research.md", persona_text("research", "Site research."))
    write(site / "writer.md", persona_text("writer", "Writes."))
    library = PersonaLibrary([base, site, tmp_path / "missing"], known_tools=TOOLS)
    assert library.load() == []
    assert sorted(library.all()) == ["default", "research", "writer"]
    assert library.get("default").description == "Base coordinator."
    assert library.get("research").description == "Site research."
    assert library.get("research").path == site / "research.md"
    with pytest.raises(KeyError, match=r"unknown persona 'nope'; known: \['default', "):
        library.get("nope")


def test_broken_override_falls_back_and_check_reports_every_dir(tmp_path: Path) -> None:
    base, site = tmp_path / "base", tmp_path / "site"
    write(base / "research.md", persona_text("research", "Base research."))
    write(base / "old.md", "no front matter")
    write(site / "research.md", persona_text("research", "Site research.").replace("tools", "tool"))
    write(site / "writer.md", persona_text("writer"))
    library = PersonaLibrary([base, site])
    errors = library.load()
    assert [str(e) for e in errors] == [
        f"{base / 'old.md'}:1: " + errors[0].reason,
        f"{site / 'research.md'}:4: unknown key 'tool'; "
        "allowed: approve, description, display_description, display_name, language, max_rounds, model, name, suggestions, tools, welcome",
    ]
    assert library.get("research").description == "Base research."
    # an overridden base file is still checked
    write(site / "research.md", persona_text("research", "Site research."))
    write(base / "research.md", "---\nname: research\n")
    generation = library.generation
    checked = library.check()
    assert [(e.path, e.line) for e in checked] == [(base / "old.md", 1), (base / "research.md", 1)]
    assert library.generation == generation
    assert library.get("research").description == "Base research."


def test_builtin_default_when_no_default_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(tmp_path / "writer.md", persona_text("writer"))
    library = PersonaLibrary([tmp_path])
    with caplog.at_level(logging.WARNING, logger="agent.personas"):
        assert library.load() == []
    assert library.get("default") is BUILTIN_DEFAULT
    assert BUILTIN_DEFAULT.path is None and BUILTIN_DEFAULT.is_coordinator
    assert "serving the built-in coordinator persona" in caplog.text


def test_reload_versions_generations_and_deletion(tmp_path: Path) -> None:
    base, site = tmp_path / "base", tmp_path / "site"
    write(base / "default.md", persona_text("default", "Base."))
    write(site / "default.md", persona_text("default", "Site v1."))
    library = PersonaLibrary([base, site])
    calls: list[int] = []
    library.subscribe(lambda: calls.append(library.generation))
    library.load()
    assert (library.generation, calls) == (1, [1])
    held = library.get("default")

    library.load()  # nothing changed: same objects, same generation, no callback
    assert library.get("default") is held and library.generation == 1 and calls == [1]

    write(site / "default.md", persona_text("default", "Site v2."))
    library.load()
    new = library.get("default")
    assert new.description == "Site v2." and new.version != held.version
    assert held.description == "Site v1."  # a turn holding the old version keeps it
    assert calls == [1, 2]

    write(site / "default.md", persona_text("default", "Site v3.").replace("name:", "nme:"))
    errors = library.load()
    assert library.get("default") is new and calls == [1, 2]  # the last good version stays
    assert [str(e).split(";")[0] for e in errors] == [f"{site / 'default.md'}:2: unknown key 'nme'"]

    (site / "default.md").unlink()
    library.load()
    assert library.get("default").description == "Base." and calls == [1, 2, 3]
    (base / "default.md").unlink()
    library.load()
    assert library.get("default") is BUILTIN_DEFAULT and calls == [1, 2, 3, 4]


class _ErrorSignal(logging.Handler):
    """Sets an event when an error about `path` is logged: broken files change nothing else."""

    def __init__(self, path: Path, event: asyncio.Event) -> None:
        super().__init__(logging.ERROR)
        self.path, self.event = str(path), event

    def emit(self, record: logging.LogRecord) -> None:
        if self.path in record.getMessage():
            self.event.set()


async def test_watch_reloads_live(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    base, site = tmp_path / "base", tmp_path / "site"
    write(base / "research.md", persona_text("research", "Base research."))
    write(site / "research.md", persona_text("research", "Site v1."))
    library = PersonaLibrary([base, site, tmp_path / "missing"], known_tools=TOOLS)
    library.load()
    changed = asyncio.Event()
    library.subscribe(changed.set)
    broken = asyncio.Event()
    signal = _ErrorSignal(site / "research.md", broken)
    logging.getLogger("agent.personas").addHandler(signal)
    task = asyncio.create_task(library.watch())
    try:
        await asyncio.sleep(0)  # one loop step: watch() registers its watcher before suspending
        write(site / "research.md", persona_text("research", "Site v2."))
        async with asyncio.timeout(10):
            await changed.wait()
        good = library.get("research")
        assert good.description == "Site v2."

        changed.clear()
        with caplog.at_level(logging.ERROR, logger="agent.personas"):
            write(site / "research.md", persona_text("research", "Site v3.", body=""))
            async with asyncio.timeout(10):
                await broken.wait()
        assert library.get("research") is good and not changed.is_set()
        assert f"{site / 'research.md'}:8: the body is empty" in caplog.text

        (site / "research.md").unlink()
        async with asyncio.timeout(10):
            await changed.wait()
        assert library.get("research").description == "Base research."
    finally:
        logging.getLogger("agent.personas").removeHandler(signal)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def test_a_tool_list_past_what_a_model_api_takes_is_refused_with_the_count() -> None:
    known = {f"mcp__big__t{i}" for i in range(130)} | {"web_search"}
    text = "---\nname: x\ndescription: d\ntools: [web_search, mcp__big__*]\n---\nbody\n"
    with pytest.raises(PersonaError) as info:
        parse_persona(Path("x.md"), text, known_tools=known)
    assert info.value.line == 4
    assert "allows 131 tools, more than the 128" in info.value.reason
    fewer = {f"mcp__big__t{i}" for i in range(45)}
    persona = parse_persona(Path("x.md"), text, known_tools=fewer | {"web_search"})
    assert persona.warnings == (
        "x.md:4: tools: 46 tools; past 40 models pick worse, consider a specialist for some"
        " of them",
    )


def test_what_users_see_of_a_persona_comes_from_its_display_keys() -> None:
    text = persona_text("specialist-trip_planner").replace(
        "max_rounds: 8\n",
        "max_rounds: 8\ndisplay_name: Trip planner\ndisplay_description: Planning your trip\n",
    )
    persona = parse_persona(Path("specialist-trip_planner.md"), text)
    assert (persona.shown_name, persona.display_description) == (
        "Trip planner",
        "Planning your trip",
    )
    made = parse_persona(
        Path("specialist-trip_planner.md"), persona_text("specialist-trip_planner")
    )
    assert made.shown_name == "Trip planner"  # made from the file name, without "specialist-"
    assert BUILTIN_DEFAULT.shown_name == "Assistant"
    welcome = persona_text("default").replace(
        "max_rounds: 8\n", "max_rounds: 8\nwelcome: Hi!\nsuggestions: ['What do you offer?']\n"
    )
    coordinator = parse_persona(Path("default.md"), welcome)
    assert (coordinator.welcome, coordinator.suggestions) == ("Hi!", ("What do you offer?",))


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("display_name: ''", "display_name must be one line of 1 to 60 characters"),
        ("suggestions: [a, '']", "suggestions takes at most 6 one-line questions"),
        ("suggestions: [a, b, c, d, e, f, g]", "suggestions takes at most 6"),
    ],
)
def test_bad_display_keys_point_at_their_line(line: str, reason: str) -> None:
    text = persona_text("m").replace("max_rounds: 8\n", f"max_rounds: 8\n{line}\n")
    with pytest.raises(PersonaError) as info:
        parse_persona(Path("m.md"), text)
    assert info.value.line == 7 and info.value.reason.startswith(reason), info.value.reason


def test_a_broken_file_is_logged_once_saying_what_serves_instead(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(tmp_path / "default.md", persona_text("default", "Good."))
    library = PersonaLibrary([tmp_path])
    library.load()
    write(tmp_path / "default.md", persona_text("default").replace("name:", "nme:"))
    write(tmp_path / "writer.md", persona_text("writer").replace("name:", "nme:"))
    with caplog.at_level(logging.WARNING, logger="agent.personas"):
        library.load()
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert [level for level, _ in lines] == ["ERROR", "ERROR"], lines
    assert lines[0][1].endswith("its last good version stays in service until the file is fixed")
    assert "writer.md:2: unknown key 'nme'" in lines[1][1]
    assert lines[1][1].endswith("it is not served until it is fixed")


def test_a_broken_default_at_start_is_one_error_not_a_missing_file_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(tmp_path / "default.md", persona_text("default").replace("name:", "nme:"))
    with caplog.at_level(logging.WARNING, logger="agent.personas"):
        PersonaLibrary([tmp_path]).load()
    [(level, message)] = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert level == "ERROR" and "no default.md" not in message
    assert message.endswith("the built-in coordinator persona serves until it is fixed")


def test_no_persona_folder_at_all_is_said_as_such(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="agent.personas"):
        PersonaLibrary([tmp_path / "personas"]).load()
    [message] = [r.getMessage() for r in caplog.records]
    assert message.startswith("no persona folder exists (personas.dirs: [")
    assert "serving the built-in coordinator persona" in message
