"""The tool loop: ask the model, run the tools it calls (in parallel), feed results back, repeat."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import Any

from agent.history import estimate_tokens
from agent.providers.base import Provider
from agent.types import (
    AuditRecord,
    Message,
    ModelRequest,
    StreamRestart,
    TextDelta,
    ToolCall,
    ToolCallEvent,
    Usage,
)
from content.parts import Part, part_to_json
from tools.approval import RUN, ApprovalGate, ApprovalPending, Pause, parsed
from tools.base import Emit, ToolContext, ToolResult, ToolSpec
from tools.control import CONTROL_TOOLS
from tools.events import AnswerDelta, AnswerReset, ToolFinished, ToolStarted
from tools.redirects import Redirect
from tools.registry import ToolRegistry

log = logging.getLogger(__name__)

Audit = Callable[[AuditRecord], Awaitable[None]]
UsageSink = Callable[[Provider, Usage], Awaitable[None]]
Record = Callable[[Message], Awaitable[None]]  # each message as the turn adds it

ROUNDS_EXHAUSTED = "I had to stop after {n} rounds of tool calls without reaching an answer."
NO_ANSWER = "I couldn't put an answer together this time. Please try asking again."
NO_GATE = (
    "not run: {name} needs a person's approval, and nobody can be asked from here;"
    " tell the user it was not done"
)
ONE_AT_A_TIME = (
    "not run: another call of this step is waiting for approval; call {name} again once"
    " that one is decided"
)


@dataclass(frozen=True, slots=True)
class LoopSettings:
    """How a tool loop runs, the coordinator's and every specialist's alike: built once from the
    `agent:` section (bot/runtime/wiring.py), a persona's own `max_rounds` put in per persona version."""

    max_rounds: int = 8
    tool_timeout_s: float = 10.0
    max_result_chars: int = 8000
    redirects: Mapping[str, Redirect] = field(default_factory=dict)  # stubs for hallucinated tools
    # the tools whose every call waits for a person's yes (tools/approval.py): per persona
    approve: frozenset[str] = frozenset()
    globs: tuple[str, ...] = ()  # `approvals.tools`: names or globs asked about in any persona
    exempt: tuple[str, ...] = ()  # `approvals.exempt`: declared tools this deployment runs unasked


@dataclass(frozen=True, slots=True)
class Resumed:
    """Where a turn interrupted by a crash stands: the loop goes on from here (bot/pipeline/resume.py).

    `messages` given to `run_loop` already end with the recorded steps; `pending` are the calls
    of the last step that left no result and may run again (idempotent tools).
    """

    rounds_done: int
    pending: tuple[ToolCall, ...] = ()
    display: tuple[Mapping[str, Any], ...] = ()  # of the recorded tool results
    parts: tuple[Part, ...] = ()  # media the recorded tool results made


@dataclass(slots=True)
class LoopResult:
    text: str
    messages: list[Message]  # everything this turn added, after the history it was given
    display: list[Mapping[str, Any]] = field(default_factory=list)
    parts: list[Part] = field(default_factory=list)  # media the tools made: the answer carries them
    answered: bool = True  # False: the model ended without words and `text` is our fallback


async def run_loop(
    *,
    provider: Provider,
    system: str,
    messages: Sequence[Message],
    tools: tuple[ToolSpec, ...],
    registry: ToolRegistry,
    allowed: Collection[str],
    ctx: ToolContext,
    emit: Emit,
    settings: LoopSettings,
    model: str | None = None,
    audit: Audit | None = None,
    on_usage: UsageSink | None = None,
    record: Record | None = None,
    resumed: Resumed | None = None,
    gate: ApprovalGate | None = None,
) -> LoopResult:
    """Run the model until it answers without tool calls, or the round limit is reached.

    The last allowed round offers no tools, so the model has to answer in words. `record`
    receives each step as it happens (the model's message, each tool result as its call ends),
    so a turn cut short by a crash can be resumed from them. A call that waits for approval
    (`settings.approve`, asked of `gate`) raises `ApprovalPending` once the step's other calls
    have ended: the turn waits, and is resumed once it is answered.
    """
    transcript = list(messages)
    start = len(transcript)
    display: list[Mapping[str, Any]] = list(resumed.display) if resumed else []
    made: list[Part] = list(resumed.parts) if resumed else []
    tooling = _Tooling(registry, allowed, ctx, emit, settings, audit, record, gate)
    if resumed is not None and resumed.pending:
        await _tool_round(list(resumed.pending), transcript, (display, made), tooling)
    for round_no in range((resumed.rounds_done if resumed else 0) + 1, settings.max_rounds + 2):
        offer = tools if round_no <= settings.max_rounds else ()
        # the blob store, for the media parts the provider sends as they are (media.py)
        request = ModelRequest(system, tuple(transcript), offer, model=model, blobs=ctx.deps.blobs)
        text, calls, cost = await _ask(provider, request, emit, on_usage)
        if not calls or not offer:
            transcript.append(Message("assistant", text, usage=cost))
            if record is not None:
                await record(transcript[-1])
            if text.strip():
                return LoopResult(text, transcript[start:], display, made)
            fallback = (
                NO_ANSWER if offer or not tools else ROUNDS_EXHAUSTED.format(n=settings.max_rounds)
            )
            return LoopResult(fallback, transcript[start:], display, made, answered=False)
        if text:
            await emit(AnswerReset())
        transcript.append(Message("assistant", text, tool_calls=tuple(calls), usage=cost))
        if record is not None:
            await record(transcript[-1])  # before the tools run: a crash knows they started
        await _tool_round(calls, transcript, (display, made), tooling)
    raise AssertionError("unreachable: the last round offers no tools")


def tool_message(call: ToolCall, result: ToolResult) -> Message:
    return Message(
        "tool",
        result.text,
        tool_call_id=call.id,
        name=call.name,
        is_error=not result.ok,
        parts=result.parts,
    )


def _audit_extra(result: ToolResult) -> dict[str, Any]:
    """What the audit row keeps beside the text: display hints (a resumed turn shows what a
    replayed result showed, a payment card, say) and the parts by reference, never bytes."""
    extra: dict[str, Any] = {}
    if result.display:
        extra["display"] = list(result.display)
    if result.parts:
        extra["parts"] = [part_to_json(part) for part in result.parts]
    return extra


async def _tool_round(
    calls: list[ToolCall],
    transcript: list[Message],
    shown: tuple[list[Mapping[str, Any]], list[Part]],
    tooling: _Tooling,
) -> None:
    """Run one step's calls in parallel; their display hints and media go to `shown`. A call
    waiting for approval is left open, and raised once the others have ended."""
    instead: dict[str, ToolResult] = {}
    paused: tuple[str, Pause] | None = None
    for call in calls:
        if call.name not in tooling.settings.approve or call.name not in tooling.allowed:
            continue
        verdict = await _verdict(call, tooling)
        if isinstance(verdict, Pause):
            if paused is None:
                paused = (call.id, verdict)
            else:  # one question at a time: the model asks again once the first is answered
                instead[call.id] = ToolResult(ONE_AT_A_TIME.format(name=call.name), ok=False)
        elif isinstance(verdict, ToolResult):
            instead[call.id] = verdict
    running = [call for call in calls if paused is None or call.id != paused[0]]
    async with asyncio.TaskGroup() as group:
        tasks = [
            group.create_task(_run_tool(call, tooling, instead.get(call.id))) for call in running
        ]
    results = [task.result() for task in tasks]
    display, made = shown
    for call, result in zip(running, results, strict=True):
        display.extend(result.display)
        made.extend(result.parts)
        transcript.append(tool_message(call, result))
    if paused is not None:
        raise ApprovalPending(*paused)


async def _verdict(call: ToolCall, t: _Tooling) -> Pause | ToolResult | str:
    """The gate's answer for a call that needs approval (no gate: it is not run)."""
    if t.gate is None:
        return ToolResult(NO_GATE.format(name=call.name), ok=False)
    ctx = replace(t.ctx, tool_name=call.name, call_id=call.id)
    verdict = await t.gate.check(call.name, parsed(call.arguments), ctx)
    return RUN if isinstance(verdict, str) else verdict


async def _ask(
    provider: Provider,
    request: ModelRequest,
    emit: Emit,
    on_usage: UsageSink | None,
) -> tuple[str, list[ToolCall], Usage | None]:
    parts: list[str] = []
    calls: list[ToolCall] = []
    cost: Usage | None = None  # None: the server reported no usage (some compatible servers)
    try:
        # aclosing: a stopped turn closes the provider's HTTP stream now, not when GC finds it
        async with aclosing(provider.stream(request)) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    if event.text:
                        parts.append(event.text)
                        await emit(AnswerDelta(event.text))
                elif isinstance(event, ToolCallEvent):
                    calls.append(event.call)
                elif isinstance(event, Usage):
                    cost = event if cost is None else _plus(cost, event)
                    if on_usage is not None:
                        await on_usage(provider, event)
                elif isinstance(event, StreamRestart):
                    # the provider starts this call over (retry or fallback): the preview goes
                    # back
                    if parts:
                        await emit(AnswerReset())
                    parts.clear()
                    calls.clear()
    except asyncio.CancelledError:  # a stop or a deadline cut the call: what it used counts
        cut = cut_usage(request, parts, calls, cost)
        if cut is not None and on_usage is not None:
            await on_usage(provider, cut)
        raise
    return "".join(parts), _unique_ids(calls), cost


def cut_usage(
    request: ModelRequest, parts: list[str], calls: list[ToolCall], reported: Usage | None
) -> Usage | None:
    """What a call cut short used beyond what its provider reported (None: nothing more).

    Providers report usage at the end of a stream (OpenAI) or only the input at its start
    (Anthropic): a stopped call would otherwise count nothing for the text it already made, and
    quotas could be dodged by stopping every answer. The model is billed for the prompt it read
    and the tokens it wrote before the connection closed; without the provider's figures, both
    are estimated as the history window does (about four characters a token). A call that
    returned nothing is not counted: it may not have reached the model."""
    if not parts and not calls and reported is None:
        return None
    written = sum(len(p) for p in parts) + sum(len(c.name) + len(c.arguments) for c in calls)
    output = max(0, written // 4 - (reported.output_tokens if reported else 0))
    if reported is not None:
        return Usage(0, output) if output else None
    prompt = len(request.system) // 4 + sum(estimate_tokens(m) for m in request.messages)
    return Usage(prompt, output)


def _plus(a: Usage, b: Usage) -> Usage:
    return Usage(a.input_tokens + b.input_tokens, a.output_tokens + b.output_tokens)


def _unique_ids(calls: list[ToolCall]) -> list[ToolCall]:
    """Some compatible servers send no or repeated call ids; results must map to calls one to one."""
    seen: set[str] = set()
    fixed = []
    for index, call in enumerate(calls):
        if not call.id or call.id in seen:
            call = replace(call, id=f"call_{index}_{len(seen)}")
        seen.add(call.id)
        fixed.append(call)
    return fixed


@dataclass(frozen=True, slots=True)
class _Tooling:
    """What running a tool call needs, the same for every call of a loop."""

    registry: ToolRegistry
    allowed: Collection[str]
    ctx: ToolContext
    emit: Emit
    settings: LoopSettings
    audit: Audit | None
    record: Record | None
    gate: ApprovalGate | None = None


async def _run_tool(call: ToolCall, t: _Tooling, instead: ToolResult | None = None) -> ToolResult:
    """Run one call (or take `instead` as its result: a call refused approval), audited and
    recorded."""
    registry, allowed, ctx, settings = t.registry, t.allowed, t.ctx, t.settings
    # control tools show themselves (AgentTool's own line, SendMessage's note); a name the
    # caller may not use gets no line either: it only returns an error
    quiet = call.name in CONTROL_TOOLS or call.name not in allowed
    label = "" if quiet else registry.status(call.name)
    await t.emit(ToolStarted(call.id, call.name, label))
    started = time.perf_counter()
    redirect = settings.redirects.get(call.name) if call.name not in allowed else None
    if instead is not None:
        result = instead
    elif redirect is not None:
        result = redirect.result(call.arguments)
    else:
        result = await registry.call(
            call.name,
            call.arguments,
            replace(ctx, tool_name=call.name, call_id=call.id),
            allowed=allowed,
            timeout_s=settings.tool_timeout_s,
            max_result_chars=settings.max_result_chars,
        )
    # errors and timeouts come back as results: every started call is finished here
    await t.emit(ToolFinished(call.id, call.name, label, ok=result.ok))
    elapsed_ms = (time.perf_counter() - started) * 1000
    log.debug("tool %s %s in %.1f ms", call.name, "ok" if result.ok else "failed", elapsed_ms)
    if t.audit is not None:
        entry = AuditRecord(
            session_id=ctx.session_id,
            turn_id=ctx.turn_id,
            call_id=call.id,
            tool_name=call.name,
            arguments=call.arguments,
            result=result.text,
            ok=result.ok,
            duration_ms=elapsed_ms,
            extra=_audit_extra(result),
        )
        await t.audit(entry)
    if t.record is not None:
        await t.record(tool_message(call, result))
    return result
