"""Tool vocabulary: the spec a model sees, the context a tool runs in, and what a call returns.

A tool reaches the world only through its `ToolContext`: who is calling (identity, never from
arguments), the turn's emit and fence, and `deps`, what the app built for every tool once at
start (settings, the shared HTTP session, the knowledge base, the specialists, the blob store).
Every field is typed; nothing is looked up by a string key or patched in after construction.

Errors::

    ToolError     a recoverable problem the model should read (bad input, nothing found ...);
                  the registry turns it into an error result, never a crash
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from content.blobs import BlobError, BlobStore
from content.parts import MediaPart, Part, media_part
from tools.events import TurnEvent
from tools.knowledge import KnowledgeBase
from tools.settings import DEFAULT_TOOLS, ToolsSettings
from tools.shared_http import SharedSession

Emit = Callable[[TurnEvent], Awaitable[None]]
# base currency -> (fetched at, monotonic s; rates by currency; the source's "last updated")
RateCache = dict[str, tuple[float, dict[str, float], str | None]]


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
    """Whether the turn still belongs to this process (`bot.pipeline.conversations.TurnSignal` is one):
    a turn lost to another process writes nothing more (agent/fence.py)."""

    @property
    def lost(self) -> bool: ...


class AgentRuntime(Protocol):
    """The specialists the control tools dispatch to and stop (`agent.workers.Workers`)."""

    async def dispatch(
        self,
        ctx: ToolContext,
        *,
        description: str,
        subagent_type: str,
        prompt: str,
        background: bool,
    ) -> ToolResult: ...

    async def stop(self, ctx: ToolContext, task_id: str) -> ToolResult: ...


Missed = Literal["late", "skip"]  # a scheduled occurrence missed while down: sent late, or not


class ScheduleDesk(Protocol):
    """Adds, lists and cancels the calling conversation's schedules (ToolError on bad input)."""

    async def add(
        self,
        ctx: ToolContext,
        *,
        when: str,
        text: str | None,
        task: str | None,
        if_missed: Missed,
        timezone: str | None,
    ) -> Mapping[str, Any]: ...

    async def listing(self, ctx: ToolContext) -> Sequence[Mapping[str, Any]]: ...

    async def cancel(self, ctx: ToolContext, schedule_id: str) -> bool: ...


class HumanHandoff(Protocol):
    """Where `transfer_to_human` hands a conversation to a person (bot/handoff/relay.py)."""

    async def transfer(self, ctx: ToolContext, reason: str, summary: str) -> str: ...


@dataclass(frozen=True, slots=True)
class ToolDeps:
    """What the app gives every tool, built once with the app; each tool degrades without a part
    (None), as in unit tests and scripts."""

    settings: ToolsSettings = DEFAULT_TOOLS
    default_timezone: str = "UTC"
    http: SharedSession | None = None
    knowledge: KnowledgeBase | None = None
    agents: AgentRuntime | None = None
    blobs: BlobStore | None = None
    schedules: ScheduleDesk | None = None  # scheduled messages (bot/schedules/desk.py)
    handoff: HumanHandoff | None = None  # None: no operators; transfer_to_human says so
    # the live exchange rates fetched lately: one cache for the app, not one per call
    rates: RateCache = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Who is calling and what the tool may touch. Identity comes from here, never from arguments.

    A turn builds one; each call gets its own copy naming the call (`tool_name`, `call_id`).
    """

    user_id: str
    channel: str = ""
    conversation_key: str = ""
    session_id: str = ""
    turn_id: str | None = None
    persona: str = "default"
    tenant: str | None = None
    # the store: a tool checks for the capability it needs (tools.memory's protocols)
    storage: object = None
    emit: Emit = _no_emit
    fence: Fence | None = None  # the turn's: its specialists write nothing once it is lost
    deps: ToolDeps = field(default_factory=ToolDeps)
    tool_name: str = ""
    call_id: str = ""

    async def keep_blob(
        self, data: bytes, *, mime_type: str, name: str | None = None
    ) -> MediaPart | None:
        """Keep bytes this call made (an image, a PDF); the part to return in `ToolResult.parts`.

        None when this deployment keeps no media: the tool's text must carry the facts anyway.
        """
        store = self.deps.blobs
        if store is None:
            return None
        try:
            ref = await store.put(
                data, mime_type=mime_type, name=name, source=f"tool:{self.tool_name}"
            )
        except BlobError as exc:
            raise ToolError(f"the file could not be kept: {exc}") from exc
        return media_part(ref)
