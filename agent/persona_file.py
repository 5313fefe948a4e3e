"""One persona file: its YAML front matter and prompt, parsed and validated, or why not.

A mistake is reported with the file, the line and the fix (`PersonaError`), never coerced:
`agent/personas.py` keeps serving a file's last good version while it is wrong. The built-in
coordinator (`BUILTIN_DEFAULT`) is what runs when no `default.md` is found.
"""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from content.texts import LANGUAGES, negotiate
from tools.registry import MAX_TOOLS, is_pattern

COORDINATOR = "default"
MAX_DESCRIPTION = 200
MANY_TOOLS = 40  # past this, models choose worse: a warning
MCP_PREFIX = "mcp__"  # an MCP server's tools: unknown while it connects, so a warning
_FENCE = "---"
# YAML counts only these as line breaks; str.splitlines() would also split on \f, \v, \x1c...
_LINE_BREAK = re.compile(r"\r\n|[\r\n]")
_EXPECTED = {
    "name": "the file name, e.g. name: specialist-research",
    "description": "one line of text, e.g. description: Looks things up on the web.",
    "tools": "a list of tool names or patterns, e.g. tools: [get_current_datetime, mcp__files__*]",
    "model": "a model name, or null for the configured model",
    "max_rounds": "a whole number from 1 to 50",
    "language": f"the language of the gateway's own texts, one of {', '.join(LANGUAGES)}",
    "display_name": "the name users see, e.g. display_name: Trip planner",
    "display_description": "one line users see while it works, e.g. display_description: Planning",
    "welcome": "text, e.g. welcome: Hello! I can help with bookings.",
    "suggestions": "a list of short questions, e.g. suggestions: ['What do you offer?']",
    "approve": "a list of tool names or patterns asked about first, e.g. approve: [mcp__github__*]",
}
MAX_DISPLAY_NAME = 60
MAX_SUGGESTIONS = 6
MAX_SUGGESTION = 120
MAX_WELCOME = 1000


class _FrontMatter(BaseModel):
    # strict: `max_rounds: "8"` or `name: yes` are mistakes worth reporting, not coercing
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str
    description: str
    tools: list[str]
    model: str | None = None
    max_rounds: int | None = Field(default=None, ge=1, le=50)
    # the gateway's own texts in its conversations, where the user's language is not known
    language: str | None = None

    @field_validator("language")
    @classmethod
    def _spoken(cls, language: str | None) -> str | None:
        if language is None:
            return None
        if (ours := negotiate(language)) is None:
            raise ValueError(f"language {language!r} has no texts; known: {', '.join(LANGUAGES)}")
        return ours

    # what end users see: the name and description never leave the gateway's own logs and tools
    display_name: str | None = None
    display_description: str | None = None
    welcome: str | None = None  # the coordinator's: the widget's first bubble
    suggestions: list[str] = Field(default_factory=list)  # the coordinator's: questions to tap
    # tools (names or globs) whose every call waits for a person's yes (tools/approval.py)
    approve: list[str] = Field(default_factory=list)

    @field_validator("display_name", "display_description")
    @classmethod
    def _shown_line(cls, text: str | None, info: ValidationInfo) -> str | None:
        if text is None:
            return None
        text = text.strip()
        limit = MAX_DISPLAY_NAME if info.field_name == "display_name" else MAX_DESCRIPTION
        if not text or "\n" in text or len(text) > limit:
            raise ValueError(
                f"{info.field_name} must be one line of 1 to {limit} characters; "
                "remove the key to use the default"
            )
        return text

    @field_validator("welcome")
    @classmethod
    def _welcome(cls, text: str | None) -> str | None:
        if text is not None and len(text.strip()) > MAX_WELCOME:
            raise ValueError(f"welcome is longer than {MAX_WELCOME} characters; shorten it")
        return text.strip() or None if text is not None else None

    @field_validator("suggestions")
    @classmethod
    def _suggestions(cls, items: list[str]) -> list[str]:
        items = [item.strip() for item in items]
        if len(items) > MAX_SUGGESTIONS or any(
            not item or "\n" in item or len(item) > MAX_SUGGESTION for item in items
        ):
            raise ValueError(
                f"suggestions takes at most {MAX_SUGGESTIONS} one-line questions of 1 to "
                f"{MAX_SUGGESTION} characters each"
            )
        return items

    @field_validator("name")
    @classmethod
    def _matches_file(cls, name: str, info: ValidationInfo) -> str:
        stem = (info.context or {}).get("stem", name)
        if name != stem:
            raise ValueError(f"name {name!r} must equal the file name {stem!r}")
        return name

    @field_validator("description")
    @classmethod
    def _one_line(cls, text: str) -> str:
        text = text.strip()
        if not text:
            raise ValueError("description is empty; write one line on what this persona does")
        if "\n" in text:
            raise ValueError("description must be one line; move the detail into the prompt")
        if len(text) > MAX_DESCRIPTION:
            raise ValueError(
                f"description is {len(text)} characters long; shorten it to "
                f"{MAX_DESCRIPTION} or fewer and move the detail into the prompt"
            )
        return text

    @field_validator("tools")
    @classmethod
    def _known(cls, tools: list[str], info: ValidationInfo) -> list[str]:
        known: frozenset[str] | None = (info.context or {}).get("known_tools")
        for tool in tools:
            # a pattern, or an MCP tool, may match nothing yet (its server is down): a warning,
            # in parse_persona
            if (
                known is not None
                and tool not in known
                and not is_pattern(tool)
                and not tool.startswith(MCP_PREFIX)
            ):
                close = difflib.get_close_matches(tool, known, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ValueError(f"unknown tool {tool!r}; known: {', '.join(sorted(known))}{hint}")
        return list(dict.fromkeys(tools))


_ALLOWED = ", ".join(sorted(_FrontMatter.model_fields))


@dataclass(frozen=True, slots=True)
class Persona:
    """One version of one persona; frozen so a turn can hold it from start to end."""

    name: str
    description: str
    tools: tuple[str, ...]
    model: str | None
    max_rounds: int | None
    prompt: str
    path: Path | None
    version: str
    # `path:line: reason` of what serves but deserves a look (a pattern that matches no tool)
    warnings: tuple[str, ...] = ()
    language: str | None = None  # the gateway's texts where the user's language is not known
    display_name: str = ""  # as written; `shown_name` is what users see
    display_description: str = ""
    welcome: str = ""
    suggestions: tuple[str, ...] = ()
    approve: tuple[str, ...] = ()  # tool names or globs asked about before each call

    @property
    def shown_name(self) -> str:
        """The name end users see: `display_name`, or one made from the file name."""
        return self.display_name or display_name_of(self.name)

    @property
    def is_coordinator(self) -> bool:
        return self.name == COORDINATOR


class PersonaError(Exception):
    """A persona file that cannot be served; str() reads `path:line: reason` like a compiler."""

    def __init__(self, path: Path, line: int, reason: str) -> None:
        super().__init__(f"{path}:{line}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


def _version(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:12]


def _key_line(header: Sequence[str], key: str) -> int:
    """The file line of a top-level front matter key; 1 (the opening fence) if it is absent."""
    k = re.escape(key)
    pattern = re.compile(rf"""(?:{k}|"{k}"|'{k}')\s*:""")
    return next((i + 2 for i, line in enumerate(header) if pattern.match(line)), 1)


def _load_yaml(path: Path, header: Sequence[str]) -> dict[Any, Any]:
    try:
        data = yaml.safe_load("\n".join(header))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise PersonaError(
            path,
            mark.line + 2 if mark is not None else 1,  # mark is 0-based, after the opening fence
            f"invalid YAML in the front matter: {problem}; fix the syntax "
            "(quote text that contains ': ' or starts with a special character)",
        ) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise PersonaError(path, 2, f"the front matter must be 'key: value' lines, not a {kind}")
    return data


def _validate(
    path: Path, header: Sequence[str], data: dict[Any, Any], known_tools: frozenset[str] | None
) -> _FrontMatter:
    context = {"stem": path.stem, "known_tools": known_tools}
    try:
        return _FrontMatter.model_validate(data, context=context)
    except ValidationError as exc:
        # report the topmost problem as a reader meets it; a missing key last, since it is
        # often the echo of a misspelt one (`tool:` for `tools:`)
        found = [(_key_line(header, str(e["loc"][0])), e) for e in exc.errors()]
        line, first = min(found, key=lambda pair: (pair[1]["type"] == "missing", pair[0]))
        key = str(first["loc"][0])
        if first["type"] == "extra_forbidden":
            reason = f"unknown key {key!r}; allowed: {_ALLOWED}"
        elif first["type"] == "missing":
            reason = f"missing key {key!r}; add it to the front matter as {_EXPECTED[key]}"
        elif first["type"] == "value_error":
            reason = str(first["ctx"]["error"])
        else:
            problem = first["msg"][:1].lower() + first["msg"][1:]
            reason = f"{key} {data[key]!r} is invalid: {problem}; expected {_EXPECTED[key]}"
        raise PersonaError(path, line, reason) from None


def parse_persona(path: Path, text: str, *, known_tools: Collection[str] | None = None) -> Persona:
    """Parse one persona file's text; raise PersonaError pointing at the offending line."""
    lines = _LINE_BREAK.split(text.removeprefix("\ufeff"))
    if lines[0].rstrip() != _FENCE:
        raise PersonaError(
            path,
            1,
            "missing front matter: start the file with a '---' line, then the "
            "'key: value' lines (name, description, tools), then a closing '---' line",
        )
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() == _FENCE), None)
    if end is None:
        reason = "the front matter is not terminated: add a '---' line after its last key"
        raise PersonaError(path, 1, reason)
    header = lines[1:end]
    known = frozenset(known_tools) if known_tools is not None else None
    front = _validate(path, header, _load_yaml(path, header), known)
    warnings = _unmatched(path, header, front.tools, known) + _count(
        path, header, front.tools, known
    )
    prompt = "\n".join(lines[end + 1 :]).strip()
    if not prompt:
        reason = "the body is empty; write the system prompt after the closing '---'"
        raise PersonaError(path, end + 2, reason)
    return Persona(
        name=front.name,
        description=front.description,
        tools=tuple(front.tools),
        model=front.model,
        max_rounds=front.max_rounds,
        prompt=prompt,
        path=path,
        version=_version(text),
        warnings=warnings,
        language=front.language,
        display_name=front.display_name or "",
        display_description=front.display_description or "",
        welcome=front.welcome or "",
        suggestions=tuple(front.suggestions),
        approve=tuple(dict.fromkeys(front.approve)),
    )


def display_name_of(name: str) -> str:
    """A persona file name as users may see it: "specialist-trip_planner" -> "Trip planner"."""
    if name == COORDINATOR:
        return "Assistant"
    words = re.sub(r"^specialist[-_]", "", name).replace("-", " ").replace("_", " ").strip()
    return words[:1].upper() + words[1:] if words else "Assistant"


def _unmatched(
    path: Path, header: Sequence[str], tools: Sequence[str], known: frozenset[str] | None
) -> tuple[str, ...]:
    """A warning for each pattern, or MCP tool name, that matches none of the tools known now."""
    if known is None:
        return ()
    line = _key_line(header, "tools")
    patterns = tuple(
        f"{path}:{line}: tool pattern {pattern!r} matches no tool now; it allows the tools it"
        " matches once they appear (an MCP server that is still connecting, say)"
        for pattern in tools
        if is_pattern(pattern) and not any(fnmatch.fnmatchcase(name, pattern) for name in known)
    )
    mcp = tuple(
        f"{path}:{line}: MCP tool {name!r} is not known now; it is allowed once its server"
        " lists it (is the server configured under mcp.servers, and up?)"
        for name in tools
        if name.startswith(MCP_PREFIX) and not is_pattern(name) and name not in known
    )
    return patterns + mcp


def _count(
    path: Path, header: Sequence[str], tools: Sequence[str], known: frozenset[str] | None
) -> tuple[str, ...]:
    """Refuse a list that resolves to more tools than OpenAI takes; warn past MANY_TOOLS.
    Counted against the tools known now (an MCP server still connecting counts later)."""
    if known is None:
        return ()
    names = {
        name
        for entry in tools
        for name in (
            [n for n in known if fnmatch.fnmatchcase(n, entry)] if is_pattern(entry) else [entry]
        )
    }
    line = _key_line(header, "tools")
    if len(names) > MAX_TOOLS:
        raise PersonaError(
            path,
            line,
            f"tools: the list allows {len(names)} tools, more than the {MAX_TOOLS} a model API"
            " takes; narrow its patterns (or a server's include/exclude in config.yaml)",
        )
    if len(names) > MANY_TOOLS:
        return (
            f"{path}:{line}: tools: {len(names)} tools; past {MANY_TOOLS} models pick worse,"
            " consider a specialist for some of them",
        )
    return ()


_BUILTIN_PROMPT = """\
You are a helpful assistant in a chat app. Answer in the user's language, concisely; markdown
is fine. Say so when you are unsure, and never invent facts or tool results. Call a tool when it
helps, read its errors, and correct yourself. Answer simple things directly; dispatch a specialist
only for deep work, with a self-contained prompt, and synthesize its result for the user."""

BUILTIN_DEFAULT = Persona(
    name=COORDINATOR,
    description="General-purpose coordinator (built in: no default.md was found).",
    tools=("get_current_datetime",),
    model=None,
    max_rounds=None,
    prompt=_BUILTIN_PROMPT,
    path=None,
    version=_version(_BUILTIN_PROMPT),
)
