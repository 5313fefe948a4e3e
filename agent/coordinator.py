"""One coordinator turn: pin the persona, load history within budget, run the loop, persist."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from agent.catalog import catalog_reminder
from agent.fence import Fence, FencedWrites
from agent.history import HistoryWindow
from agent.loop import LoopResult, LoopSettings, run_loop, tool_message
from agent.personas import Persona, PersonaLibrary
from agent.providers.base import Provider
from agent.replay import ReplayPoint, history_before, open_calls
from agent.store import Store, UsageLog
from agent.types import Message, ToolCall
from content.parts import Part
from tools.approval import ApprovalGate, ApprovalPending, asked
from tools.base import Emit, ToolContext, ToolDeps, ToolResult, ToolSpec
from tools.control import CONTROL_TOOLS
from tools.events import Interim, TurnEvent
from tools.redirects import Redirect
from tools.registry import ToolRegistry

log = logging.getLogger(__name__)

NOT_FINISHED = "not finished: the turn ended before this call returned"


@dataclass(frozen=True, slots=True)
class AgentSettings:
    loop: LoopSettings = field(default_factory=LoopSettings)  # the specialists' too
    context_budget_tokens: int = 24000


@dataclass(frozen=True, slots=True)
class TurnInput:
    persona: Persona  # pinned: one version from start to end of the turn
    session_id: str
    turn_id: str
    user_id: str
    channel: str
    conversation_key: str
    text: str
    parts: tuple[Part, ...] = ()  # media beside the text (images, files, audio by reference)
    # the conversation's own model (`/model`, a budget's cheaper one); None: the coordinator's
    provider: Provider | None = None
    specialists: bool = True  # False: AgentTool is not offered (a budget past its soft limit)


@dataclass(frozen=True, slots=True)
class _Prepared:
    """What a persona version needs on every turn, built once per version, never per turn."""

    system: str
    tools: tuple[ToolSpec, ...]
    allowed: frozenset[str]
    loop: LoopSettings  # the persona's round limit; redirects for the coordinator


class Coordinator:
    def __init__(
        self,
        *,
        provider: Provider,
        registry: ToolRegistry,
        store: Store,
        settings: AgentSettings,
        personas: PersonaLibrary | None = None,
        redirects: Mapping[str, Redirect] | None = None,
        deps: ToolDeps | None = None,
        gate: ApprovalGate | None = None,
    ) -> None:
        """`deps`: what its tools may reach (the specialists among them), built once; `gate`:
        who is asked before a call that needs approval (None: such calls are not run)."""
        self.gate = gate
        self.provider = provider
        self.registry = registry
        self.store = store
        self.settings = settings
        self.personas = personas
        self.redirects = redirects or {}
        self.deps = deps if deps is not None else ToolDeps()
        self._window = HistoryWindow()
        self._prepared: dict[tuple[str, str, int, tuple[int, ...]], _Prepared] = {}

    def prepare(self, persona: Persona) -> _Prepared:
        """The coordinator gets the control tools and the catalog; a specialist talked to directly
        (`bot chat --persona`) gets only its own tools. Built again when a source's tool list
        changed (an MCP server came up): its globs may match other names now."""
        generation = self.personas.generation if self.personas is not None else 0
        key = (persona.name, persona.version, generation, self.registry.version)
        prepared = self._prepared.get(key)
        if prepared is None:
            names = list(self.registry.resolve(persona.tools))
            system = persona.prompt
            if persona.is_coordinator:
                names += [n for n in CONTROL_TOOLS if n not in names and n in self.registry]
                if self.personas is not None:
                    system = f"{system}\n\n{catalog_reminder(self.personas.all())}"
            else:
                names = [n for n in names if n not in CONTROL_TOOLS]
            tools = self.registry.specs(n for n in names if n in self.registry)
            loop = replace(
                self.settings.loop,
                max_rounds=persona.max_rounds or self.settings.loop.max_rounds,
                redirects=self.redirects if persona.is_coordinator else {},
                approve=asked(
                    self.registry,
                    names,
                    (*self.settings.loop.globs, *persona.approve),
                    self.settings.loop.exempt,
                ),
            )
            prepared = _Prepared(system, tools, frozenset(names), loop)
            if len(self._prepared) > 256:
                self._prepared.clear()
            self._prepared[key] = prepared
        return prepared

    async def run_turn(
        self,
        turn: TurnInput,
        emit: Emit,
        replay: ReplayPoint | None = None,
        fence: Fence | None = None,
    ) -> LoopResult:
        """Run one turn, recording each step as it happens (see `agent.loop.run_loop`).

        `replay`: the turn was interrupted (its process died) and goes on from there; the
        history is then what came before the turn's own recorded messages.
        `fence`: once it says the turn is lost (another process took it over), nothing more is
        written for it, and what was buffered is dropped (agent/fence.py).
        """
        prepared = self.prepare(turn.persona)
        if not turn.specialists:
            prepared = _without_dispatch(prepared)
        provider = turn.provider or self.provider
        # a persona's `model` names a model of the default provider, not of a chosen one
        model = turn.persona.model if turn.provider is None else None
        rows = await self.store.load_history(turn.session_id)
        if replay is not None:
            rows = history_before(rows, turn.turn_id, replay.messages)
        history = self._window.fit(turn.session_id, rows, self.settings.context_budget_tokens)
        usage_log = UsageLog(provider, model)
        interim: list[str] = []
        writes = FencedWrites(self.store, fence, turn.turn_id)

        async def emit_and_note(event: TurnEvent) -> None:
            if isinstance(event, Interim):
                interim.append(event.text)
            await emit(event)

        ctx = ToolContext(
            user_id=turn.user_id,
            channel=turn.channel,
            conversation_key=turn.conversation_key,
            session_id=turn.session_id,
            turn_id=turn.turn_id,
            persona=turn.persona.name,
            storage=self.store,
            emit=emit_and_note,
            fence=fence,
            deps=self.deps,
        )
        unanswered: dict[str, ToolCall] = {}

        async def record(message: Message) -> None:
            if message.tool_calls:
                unanswered.update((call.id, call) for call in message.tool_calls)
            elif message.tool_call_id is not None:
                unanswered.pop(message.tool_call_id, None)
            # with the usage of the model call that wrote it: one transaction
            await writes.append_messages(turn.session_id, turn.turn_id, [message], usage_log.take())

        if replay is None:
            own: list[Message] = [Message("user", turn.text, parts=turn.parts)]
            await record(own[0])  # kept even when the turn fails or is stopped
        else:
            own = list(replay.messages)
            unanswered.update((call.id, call) for call in open_calls(own))
            if replay.recovered:
                await writes.append_messages(turn.session_id, turn.turn_id, list(replay.recovered))
        try:
            result = await run_loop(
                provider=provider,
                system=prepared.system,
                messages=[*history, *own],
                tools=prepared.tools,
                registry=self.registry,
                allowed=prepared.allowed,
                ctx=ctx,
                emit=emit_and_note,
                settings=prepared.loop,
                model=model,
                audit=writes.record_tool_call,
                on_usage=usage_log,
                record=record,
                resumed=None if replay is None else replay.resumed,
                gate=self.gate,
            )
            if interim and not result.answered:
                # everything was said through SendMessage: the last note is the answer, sent once
                result.text = interim[-1]
            return result
        except ApprovalPending as paused:
            unanswered.pop(paused.call_id, None)  # open on purpose: the turn goes on from it
            raise
        finally:
            # A turn that ends early (stopped, timed out, failed) closes the calls it left open,
            # so the history never holds a call without its result (the APIs refuse that).
            if unanswered:
                closing = [
                    tool_message(call, ToolResult(NOT_FINISHED, ok=False))
                    for call in unanswered.values()
                ]
                await writes.append_messages(turn.session_id, turn.turn_id, closing)
            await usage_log.write(writes, session_id=turn.session_id, turn_id=turn.turn_id)


DISPATCH = "AgentTool"


def _without_dispatch(prepared: _Prepared) -> _Prepared:
    """The same persona version with no specialist to dispatch: neither offered nor callable."""
    if DISPATCH not in prepared.allowed:
        return prepared
    tools = tuple(spec for spec in prepared.tools if spec.name != DISPATCH)
    return replace(prepared, tools=tools, allowed=prepared.allowed - {DISPATCH})
