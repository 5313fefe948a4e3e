"""One coordinator turn: pin the persona, load history within budget, run the loop, persist."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from agent.history import fit_history
from agent.loop import LoopResult, LoopSettings, run_loop
from agent.personas import Persona
from agent.providers.base import Provider
from agent.store import Store
from agent.types import Message, Usage
from tools.base import Emit, ToolContext, ToolSpec
from tools.registry import ToolRegistry

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AgentSettings:
    max_rounds: int = 8
    tool_timeout_s: float = 10.0
    context_budget_tokens: int = 24000
    max_result_chars: int = 8000


@dataclass(frozen=True, slots=True)
class TurnInput:
    persona: Persona  # pinned: one version from start to end of the turn
    session_id: str
    turn_id: str
    user_id: str
    channel: str
    conversation_key: str
    text: str


@dataclass(frozen=True, slots=True)
class _Prepared:
    """What a persona version needs on every turn, built once per version, never per turn."""

    system: str
    tools: tuple[ToolSpec, ...]
    allowed: frozenset[str]


class Coordinator:
    def __init__(
        self,
        *,
        provider: Provider,
        registry: ToolRegistry,
        store: Store,
        settings: AgentSettings,
        services: dict[str, Any] | None = None,
    ) -> None:
        self.provider = provider
        self.registry = registry
        self.store = store
        self.settings = settings
        self.services = services if services is not None else {}
        self._prepared: dict[tuple[str, str], _Prepared] = {}

    def prepare(self, persona: Persona) -> _Prepared:
        key = (persona.name, persona.version)
        prepared = self._prepared.get(key)
        if prepared is None:
            allowed = frozenset(persona.tools)
            tools = self.registry.specs(name for name in persona.tools if name in self.registry)
            prepared = _Prepared(persona.prompt, tools, allowed)
            if len(self._prepared) > 256:
                self._prepared.clear()
            self._prepared[key] = prepared
        return prepared

    async def run_turn(self, turn: TurnInput, emit: Emit) -> LoopResult:
        prepared = self.prepare(turn.persona)
        rows = await self.store.load_history(turn.session_id)
        history = fit_history(rows, self.settings.context_budget_tokens)
        user = Message("user", turn.text)
        ctx = ToolContext(
            user_id=turn.user_id,
            channel=turn.channel,
            conversation_key=turn.conversation_key,
            session_id=turn.session_id,
            turn_id=turn.turn_id,
            persona=turn.persona.name,
            storage=self.store,
            emit=emit,
            services=self.services,
        )
        usages: list[Usage] = []

        async def on_usage(provider: Provider, usage: Usage) -> None:
            usages.append(usage)

        written: list[Message] = [user]
        try:
            result = await run_loop(
                provider=self.provider,
                system=prepared.system,
                messages=[*history, user],
                tools=prepared.tools,
                registry=self.registry,
                allowed=prepared.allowed,
                ctx=ctx,
                emit=emit,
                settings=LoopSettings(
                    max_rounds=turn.persona.max_rounds or self.settings.max_rounds,
                    tool_timeout_s=self.settings.tool_timeout_s,
                    max_result_chars=self.settings.max_result_chars,
                ),
                model=turn.persona.model,
                audit=self.store.record_tool_call,
                on_usage=on_usage,
            )
            written.extend(result.messages)
            return result
        finally:
            # The user's words are kept even when the turn fails or is stopped; a half-done
            # exchange of tool calls is not, so history never holds a call without its result.
            await self.store.append_messages(turn.session_id, turn.turn_id, written)
            for usage in usages:
                await self.store.record_usage(
                    session_id=turn.session_id,
                    turn_id=turn.turn_id,
                    provider=self.provider.name,
                    model=turn.persona.model or self.provider.model,
                    input_tokens=usage.input_tokens,
                    output_tokens=usage.output_tokens,
                )
