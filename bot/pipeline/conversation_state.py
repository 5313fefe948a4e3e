"""A conversation's own state: its mode (bot, waiting for a person, with a person), who holds it,
and its per-chat settings — the `ConversationState` seam, in memory, in the store or in Redis.

The routing step reads the mode of every message (bot/pipeline/routing.py), so a conversation nobody
changed has no record at all: its state is the defaults, and reading it finds nothing. Changes
are read-modify-write (`update`), atomic against every other writer sharing the backend: the
store and Redis compare-and-set on the version and retry, so two concurrent changes both land.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Final, Literal, Protocol, get_args

from bot.storage.roles import ConversationStateRecords
from bot.storage.rows import ConversationStateRow

Mode = Literal["bot", "waiting", "human"]
MODES: Final[tuple[Mode, ...]] = get_args(Mode)
CAS_ATTEMPTS: Final = 50  # each failed attempt means another writer's change landed meanwhile

_NO_SETTINGS: Final[Mapping[str, str]] = MappingProxyType({})


def frozen_settings(settings: Mapping[str, str]) -> Mapping[str, str]:
    """A read-only copy: a state is a value, shared between tasks without a lock."""
    return MappingProxyType(dict(settings)) if settings else _NO_SETTINGS


@dataclass(frozen=True, slots=True)
class StateSnapshot:
    """A conversation's state as of `version` (0: never changed, the defaults)."""

    mode: Mode = "bot"
    assignee: str | None = None  # who holds it in `waiting` / `human` (an operator's id)
    settings: Mapping[str, str] = field(default_factory=lambda: _NO_SETTINGS)
    version: int = 0
    updated_at: float = 0.0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown conversation mode {self.mode!r}; known: {list(MODES)}")
        object.__setattr__(self, "settings", frozen_settings(self.settings))

    def with_setting(self, name: str, value: str | None) -> StateSnapshot:
        """This state with one setting set (None: removed, back to its default)."""
        settings = {k: v for k, v in self.settings.items() if k != name}
        if value is not None:
            settings[name] = value
        return replace(self, settings=settings)


DEFAULT: Final = StateSnapshot()

Change = Callable[[StateSnapshot], StateSnapshot]


class StateConflict(Exception):
    """A change lost the compare-and-set `CAS_ATTEMPTS` times in a row: too many writers at once."""


class ConversationState(Protocol):
    """Per conversation key: `get` (the defaults for one never changed), `mode` (the routing
    step's read: the cheapest), `update` (atomic read-modify-write, across everything sharing
    the backend; the change returns the new state, whose version the seam sets)."""

    async def get(self, key: str) -> StateSnapshot: ...

    async def mode(self, key: str) -> Mode: ...

    async def update(self, key: str, change: Change) -> StateSnapshot: ...


def next_state(current: StateSnapshot, change: Change) -> StateSnapshot:
    """What `change` makes of `current`, with the version moved on and the time stamped."""
    changed = change(current)
    return replace(changed, version=current.version + 1, updated_at=time.time())


class MemoryConversationState:
    """In this process (`bot chat`, tests): no await between the read and the write."""

    def __init__(self) -> None:
        self._states: dict[str, StateSnapshot] = {}

    async def get(self, key: str) -> StateSnapshot:
        return self._states.get(key, DEFAULT)

    async def mode(self, key: str) -> Mode:
        state = self._states.get(key)
        return "bot" if state is None else state.mode

    async def update(self, key: str, change: Change) -> StateSnapshot:
        state = self._states[key] = next_state(self._states.get(key, DEFAULT), change)
        return state


def snapshot_of(row: ConversationStateRow | None) -> StateSnapshot:
    if row is None:
        return DEFAULT
    mode = row.mode if row.mode in MODES else "bot"  # a newer process's mode
    return StateSnapshot(mode, row.assignee, row.settings, row.version, row.updated_at)


class StoredConversationState:
    """Kept in records with a version (the store's table, or Redis hashes: bot/redis/states.py):
    each change a compare-and-set on the version, retried when another writer moved it.

    `alone`: this process is the records' only writer (one process, no Redis), so the states it
    read or wrote stay true: the newest `CACHED` are kept and read again without a statement (a
    turn reads its conversation's state twice: routing, then the turn). A change still goes
    through the compare-and-set, and one that loses reads the records, not what is kept."""

    CACHED: Final = 10_000  # states kept (~150 bytes each), the least recently used let go of

    def __init__(self, records: ConversationStateRecords, *, alone: bool = False) -> None:
        self.records = records
        self._kept: OrderedDict[str, StateSnapshot] | None = OrderedDict() if alone else None
        self._changes = 0  # changes begun and ended: a read that saw it move is not kept

    async def get(self, key: str) -> StateSnapshot:
        kept = self._kept
        if kept is None:
            return snapshot_of(await self.records.load_conversation_state(key))
        state = kept.get(key)
        if state is not None:
            kept.move_to_end(key)
            return state
        changes = self._changes
        state = snapshot_of(await self.records.load_conversation_state(key))
        if changes == self._changes:
            self._keep(key, state)
        return state

    async def mode(self, key: str) -> Mode:
        return (await self.get(key)).mode  # one primary-key read; no row for most conversations

    async def update(self, key: str, change: Change) -> StateSnapshot:
        for attempt in range(CAS_ATTEMPTS):
            if attempt and self._kept is not None:
                self._kept.pop(key, None)  # lost: what was kept is not the records' state
            current = await self.get(key)
            new = next_state(current, change)
            row = ConversationStateRow(
                key, new.mode, new.assignee, new.settings, new.version, new.updated_at
            )
            self._changes += 1  # and again when it is done: no read that overlapped it is kept
            try:
                saved = await self.records.save_conversation_state(
                    row, expected_version=current.version
                )
            finally:
                self._changes += 1
            if saved:
                if self._kept is not None:
                    self._keep(key, new)
                return new
        raise StateConflict(f"{key}: {CAS_ATTEMPTS} changes of others landed first; try again")

    def _keep(self, key: str, state: StateSnapshot) -> None:
        kept = self._kept
        assert kept is not None
        kept[key] = state
        kept.move_to_end(key)
        if len(kept) > self.CACHED:
            kept.popitem(last=False)
