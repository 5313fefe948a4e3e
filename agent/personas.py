"""Persona files: parse and validate them, serve them from override dirs, reload them live."""

from __future__ import annotations

import difflib
import hashlib
import logging
import os
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import watchfiles
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

log = logging.getLogger(__name__)

COORDINATOR = "default"
MAX_DESCRIPTION = 200
DEBOUNCE_MS = 50
_FENCE = "---"
# YAML counts only these as line breaks; str.splitlines() would also split on \f, \v, \x1c...
_LINE_BREAK = re.compile(r"\r\n|[\r\n]")
_EXPECTED = {
    "name": "the file name, e.g. name: specialist-research",
    "description": "one line of text, e.g. description: Looks things up on the web.",
    "tools": "a list of tool names, e.g. tools: [get_current_datetime] (or tools: [])",
    "model": "a model name, or null for the configured model",
    "max_rounds": "a whole number from 1 to 50",
}


class _FrontMatter(BaseModel):
    # strict: `max_rounds: "8"` or `name: yes` are mistakes worth reporting, not coercing
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str
    description: str
    tools: list[str]
    model: str | None = None
    max_rounds: int | None = Field(default=None, ge=1, le=50)

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
            if known is not None and tool not in known:
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
    )


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


def _is_persona_name(name: str) -> bool:
    return name.endswith(".md") and not name.startswith(".")  # skip editors' hidden lock files


def _watch_filter(_change: watchfiles.Change, path: str) -> bool:
    return _is_persona_name(os.path.basename(path))


class PersonaLibrary:
    """Personas from override dirs, served from memory and reloaded file by file as files change."""

    def __init__(self, dirs: Sequence[Path], *, known_tools: Collection[str] | None = None) -> None:
        self._dirs = tuple(Path(d) for d in dirs)
        self._known_tools = frozenset(known_tools) if known_tools is not None else None
        self._good: dict[tuple[int, str], Persona] = {}  # (dir index, stem) -> last good version
        self._broken: dict[tuple[int, str], PersonaError] = {}  # the file's error since then
        self._serving: Mapping[str, Persona] = MappingProxyType({COORDINATOR: BUILTIN_DEFAULT})
        self._generation = 0
        self._subscribers: list[Callable[[], None]] = []

    @property
    def generation(self) -> int:
        return self._generation

    def get(self, name: str) -> Persona:
        try:
            return self._serving[name]
        except KeyError:
            raise KeyError(f"unknown persona {name!r}; known: {sorted(self._serving)}") from None

    def all(self) -> Mapping[str, Persona]:
        return self._serving  # a read-only view of a dict that is replaced, never mutated

    def errors(self) -> list[PersonaError]:
        """Every file that is broken now (its last good version, if any, still serves)."""
        return [self._broken[k] for k in sorted(self._broken)]

    def subscribe(self, callback: Callable[[], None]) -> None:
        self._subscribers.append(callback)

    def load(self) -> list[PersonaError]:
        """(Re)load every file; a broken one keeps its last good version and is returned."""
        targets = set(self._good) | set(self._broken)
        for i, folder in enumerate(self._dirs):
            if not folder.is_dir():
                log.debug("persona dir %s does not exist; skipping it", folder)
                continue
            targets.update((i, path.stem) for path in self._files(folder))
        return self._refresh(targets)

    def check(self) -> list[PersonaError]:
        """Validate every file in every dir, overridden ones too; what is in service stays."""
        errors: list[PersonaError] = []
        for i, folder in enumerate(self._dirs):
            if folder.is_dir():
                for path in self._files(folder):
                    result = self._read(i, path.stem)
                    if isinstance(result, PersonaError):
                        errors.append(result)
        return errors

    async def watch(self) -> None:
        """Reload changed files until cancelled; returns at once if no dir exists."""
        existing = [folder for folder in self._dirs if folder.is_dir()]
        if not existing:
            log.debug("no persona dir exists; not watching for changes")
            return
        roots = [os.path.realpath(folder) for folder in self._dirs]
        async for changes in watchfiles.awatch(
            *existing, watch_filter=_watch_filter, debounce=DEBOUNCE_MS, recursive=False
        ):
            targets: set[tuple[int, str]] = set()
            for _change, raw in changes:
                changed = Path(raw)
                parent = os.path.realpath(changed.parent)
                hits = [i for i, root in enumerate(roots) if root == parent]
                targets.update((i, changed.stem) for i in hits or range(len(roots)))
            for error in self._refresh(targets):
                log.error("%s", error)

    @staticmethod
    def _files(folder: Path) -> list[Path]:
        return sorted(p for p in folder.glob("*.md") if _is_persona_name(p.name))

    def _read(self, index: int, stem: str) -> Persona | PersonaError | None:
        path = self._dirs[index] / f"{stem}.md"
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            return PersonaError(path, 1, f"cannot read the file: {exc.strerror or exc}")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw[: exc.start].count(b"\n") + 1
            return PersonaError(path, line, "the file is not UTF-8 text; save it as UTF-8")
        try:
            return parse_persona(path, text, known_tools=self._known_tools)
        except PersonaError as err:
            return err

    def _refresh(self, targets: Iterable[tuple[int, str]]) -> list[PersonaError]:
        errors: list[PersonaError] = []
        for index, stem in sorted(targets):
            result = self._read(index, stem)
            self._broken.pop((index, stem), None)
            if result is None:
                self._good.pop((index, stem), None)
            elif isinstance(result, PersonaError):
                errors.append(result)
                self._broken[(index, stem)] = result
            else:
                old = self._good.get((index, stem))
                if old is None or old.version != result.version:
                    self._good[(index, stem)] = result
        self._publish()
        return errors

    def _publish(self) -> None:
        serving: dict[str, Persona] = {}
        for (_index, stem), persona in sorted(self._good.items(), key=lambda kv: kv[0][::-1]):
            serving[stem] = persona  # sorted by name, then dir: a later dir wins
        serving.setdefault(COORDINATOR, BUILTIN_DEFAULT)
        old = self._serving
        first = self._generation == 0
        changed = sorted(k for k in serving.keys() | old.keys() if serving.get(k) is not old.get(k))
        if not (first or changed):
            return
        self._serving = MappingProxyType(serving)
        self._generation += 1
        log.info("personas generation %d; changed: %s", self._generation, changed or "none")
        builtin = serving[COORDINATOR] is BUILTIN_DEFAULT
        if builtin and (first or old[COORDINATOR] is not BUILTIN_DEFAULT):
            log.warning(
                "no %s.md in %s; serving the built-in coordinator persona",
                COORDINATOR,
                [str(folder) for folder in self._dirs],
            )
        for callback in tuple(self._subscribers):
            try:
                callback()
            except Exception:  # one broken catalog must not stop the others from refreshing
                log.exception("persona subscriber %r failed", callback)
