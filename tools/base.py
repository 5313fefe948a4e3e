"""Tool vocabulary: the spec a model sees, the context a tool runs in, and what a call returns.

Errors::

    ToolError     a recoverable problem the model should read (bad input, nothing found ...);
                  the registry turns it into an error result, never a crash
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from content.parts import Part
from tools.events import TurnEvent

Emit = Callable[[TurnEvent], Awaitable[None]]


class ToolError(Exception):
    """Raised by a tool for a problem the model can act on; its message becomes the result."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What the model is told about a tool."""

    name: str
    description: str
    parameters: Mapping[str, Any]  # JSON schema of the arguments object


@dataclass(frozen=True, slots=True)
class ToolResult:
    text: str  # what the model reads
    ok: bool = True
    display: tuple[Mapping[str, Any], ...] = ()  # structured hints for channels that render them
    parts: tuple[Part, ...] = ()  # media the tool made (a chart, a PDF), by blob reference


async def _no_emit(event: TurnEvent) -> None:
    return None


class Fence(Protocol):
    """Whether the turn still belongs to this process (`bot.conversations.TurnSignal` is one):
    a turn lost to another process writes nothing more (agent/fence.py)."""

    @property
    def lost(self) -> bool: ...


@dataclass(slots=True)
class ToolContext:
    """Who is calling and what the tool may touch. Identity comes from here, never from arguments."""

    user_id: str
    channel: str = ""
    conversation_key: str = ""
    session_id: str = ""
    turn_id: str | None = None
    persona: str = "default"
    tenant: str | None = None
    storage: Any = None
    emit: Emit = _no_emit
    call_id: str = ""
    services: dict[str, Any] = field(default_factory=dict)  # spawn, config ... wired by the app
    fence: Fence | None = None  # the turn's: its specialists write nothing once it is lost
