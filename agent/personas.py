"""Persona files served from override dirs, from memory, and reloaded file by file as they change.

Reading one file (front matter, validation, line-numbered errors) is `agent/persona_file.py`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

import watchfiles

from agent.persona_file import (
    BUILTIN_DEFAULT,
    COORDINATOR,
    Persona,
    PersonaError,
    parse_persona,
)

log = logging.getLogger(__name__)

# the names the agent, the gateway and the tests import from here
__all__ = [
    "BUILTIN_DEFAULT",
    "COORDINATOR",
    "Persona",
    "PersonaError",
    "PersonaLibrary",
    "parse_persona",
]

DEBOUNCE_MS = 50


def _is_persona_name(name: str) -> bool:
    return name.endswith(".md") and not name.startswith(".")  # skip editors' hidden lock files


def _watch_filter(_change: watchfiles.Change, path: str) -> bool:
    return _is_persona_name(os.path.basename(path))


class PersonaLibrary:
    """Personas from override dirs, served from memory and reloaded file by file as files change."""

    def __init__(
        self,
        dirs: Sequence[Path],
        *,
        known_tools: Collection[str] | Callable[[], Collection[str]] | None = None,
    ) -> None:
        """`known_tools`: the names a persona may list, or how to ask for them at each load
        (the registry's, which grow as MCP servers connect)."""
        self._dirs = tuple(Path(d) for d in dirs)
        self._known_tools = (
            known_tools
            if known_tools is None or callable(known_tools)
            else (frozenset(known_tools))
        )
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
            self._refresh(targets)  # it logs each broken file, and what serves instead

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
            known = self._known_tools
            return parse_persona(path, text, known_tools=known() if callable(known) else known)
        except PersonaError as err:
            return err

    def _refresh(self, targets: Iterable[tuple[int, str]]) -> list[PersonaError]:
        """Read `targets` again; each broken file is logged (before what changes is), saying
        what serves in its place, and returned."""
        errors: list[PersonaError] = []
        for index, stem in sorted(targets):
            result = self._read(index, stem)
            self._broken.pop((index, stem), None)
            if result is None:
                self._good.pop((index, stem), None)
            elif isinstance(result, PersonaError):
                errors.append(result)
                self._broken[(index, stem)] = result
                log.error("%s; %s", result, self._instead(index, stem))
            else:
                old = self._good.get((index, stem))
                if old is None or old.version != result.version:
                    self._good[(index, stem)] = result
                    for warning in result.warnings:
                        log.warning("%s", warning)
        self._publish()
        return errors

    def _instead(self, index: int, stem: str) -> str:
        """What serves while the file at (index, stem) is broken."""
        if (index, stem) in self._good:
            return "its last good version stays in service until the file is fixed"
        if any(name == stem for (_i, name) in self._good):
            return "the same persona from another persona dir serves until it is fixed"
        if stem == COORDINATOR:
            return "the built-in coordinator persona serves until it is fixed"
        return "it is not served until it is fixed"

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
        broken = any(stem == COORDINATOR for (_i, stem) in self._broken)
        if builtin and not broken and (first or old[COORDINATOR] is not BUILTIN_DEFAULT):
            # (a broken default.md was reported with its error, which says the same)
            existing = [str(folder) for folder in self._dirs if folder.is_dir()]
            where = (
                f"no {COORDINATOR}.md in {existing}"
                if existing
                else f"no persona folder exists (personas.dirs: {[str(d) for d in self._dirs]})"
            )
            log.warning(
                "%s; serving the built-in coordinator persona (a general assistant with the"
                " clock tool); add %s.md there to give it your own prompt",
                where,
                COORDINATOR,
            )
        for callback in tuple(self._subscribers):
            try:
                callback()
            except Exception:  # one broken catalog must not stop the others from refreshing
                log.exception("persona subscriber %r failed", callback)
