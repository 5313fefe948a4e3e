"""The tool loop with the scripted model: rounds, parallel tools, errors as results, limits."""

import asyncio
import json

from agent.history import fit_history
from agent.loop import Audit, LoopResult, LoopSettings, run_loop
from agent.providers.scripted import Reply, ScriptedProvider
from agent.types import AuditRecord, Message, ToolCall
from tools.base import ToolContext, ToolError
from tools.events import AnswerDelta, AnswerReset, ToolStarted, TurnEvent
from tools.registry import ToolRegistry, tool

started: list[str] = []
release = asyncio.Event()


@tool
async def slow(ctx: ToolContext, label: str) -> str:
    """Wait until released.

    Args:
        label: a name for this call
    """
    started.append(label)
    if len(started) >= 2:
        release.set()
    await release.wait()
    return f"done {label}"


@tool
async def broken(ctx: ToolContext) -> str:
    """Always fails."""
    raise RuntimeError("the disk is on fire")


@tool
async def picky(ctx: ToolContext, n: int) -> str:
    """Needs a number.

    Args:
        n: any integer
    """
    if n < 0:
        raise ToolError("n must not be negative")
    return str(n * 2)


@tool(timeout_s=0.05)
async def hangs(ctx: ToolContext) -> str:
    """Never returns."""
    await asyncio.Event().wait()
    return "never"


REGISTRY = ToolRegistry([slow, broken, picky, hangs])
ALL = ("slow", "broken", "picky", "hangs")


async def _run(
    provider: ScriptedProvider,
    *,
    allowed: tuple[str, ...] = ALL,
    rounds: int = 8,
    audit: Audit | None = None,
) -> tuple[LoopResult, list[TurnEvent]]:
    events: list[TurnEvent] = []

    async def emit(event: TurnEvent) -> None:
        events.append(event)

    result = await run_loop(
        provider=provider,
        system="be brief",
        messages=[Message("user", "hi")],
        tools=REGISTRY.specs(allowed),
        registry=REGISTRY,
        allowed=allowed,
        ctx=ToolContext(user_id="u1", session_id="s1"),
        emit=emit,
        settings=LoopSettings(max_rounds=rounds, tool_timeout_s=1.0),
        audit=audit,
    )
    return result, events


async def test_plain_answer_streams_and_returns() -> None:
    provider = ScriptedProvider([Reply("Hello there", chunks=3)])
    result, events = await _run(provider)
    assert result.text == "Hello there"
    assert "".join(e.text for e in events if isinstance(e, AnswerDelta)) == "Hello there"
    assert provider.requests[0].system == "be brief"
    assert [s.name for s in provider.requests[0].tools] == list(ALL)


async def test_two_tools_in_one_round_run_in_parallel_results_in_call_order() -> None:
    started.clear()
    release.clear()
    audits: list[AuditRecord] = []

    async def audit(record: AuditRecord) -> None:
        audits.append(record)

    provider = ScriptedProvider(
        [
            Reply("Let me look", calls=[("slow", {"label": "a"}), ("slow", {"label": "b"})]),
            Reply("both done"),
        ]
    )
    result, events = await asyncio.wait_for(_run(provider, audit=audit), 5)
    assert result.text == "both done"
    second = provider.requests[1].messages
    assert [m.role for m in second] == ["user", "assistant", "tool", "tool"]
    assert [m.content for m in second[2:]] == ["done a", "done b"]
    assert second[2].tool_call_id == second[1].tool_calls[0].id
    assert any(isinstance(e, AnswerReset) for e in events)  # "Let me look" was preamble
    assert len([e for e in events if isinstance(e, ToolStarted)]) == 2
    assert sorted(a.arguments for a in audits if a.ok) == ['{"label": "a"}', '{"label": "b"}']
    assert [m.role for m in result.messages] == ["assistant", "tool", "tool", "assistant"]


async def test_tool_failures_are_results_the_model_reads() -> None:
    provider = ScriptedProvider(
        [
            Reply(
                calls=[
                    ("broken", {}),
                    ("picky", {"n": "many"}),
                    ("picky", {"n": -1}),
                    ("hangs", {}),
                ]
            ),
            Reply(calls=[("nope", {}), ("picky", "{not json")]),
            Reply("sorry"),
        ]
    )
    result, _ = await _run(provider)
    assert result.text == "sorry"
    first = [m for m in provider.requests[1].messages if m.role == "tool"]
    assert all(m.is_error for m in first)
    assert "RuntimeError: the disk is on fire" in first[0].content
    assert "'n'" in first[1].content
    assert "n must not be negative" in first[2].content
    assert "timed out" in first[3].content
    second = [m for m in provider.requests[2].messages if m.role == "tool"][4:]
    assert "unknown tool 'nope'" in second[0].content
    assert "invalid arguments" in second[1].content


async def test_tool_outside_the_allowlist_never_runs() -> None:
    started.clear()
    provider = ScriptedProvider([Reply(calls=[("slow", {"label": "x"})]), Reply("ok")])
    await _run(provider, allowed=("picky",))
    assert started == []
    tool_message = provider.requests[1].messages[-1]
    assert tool_message.is_error and "not available" in tool_message.content


async def test_round_limit_forces_an_answer_without_tools() -> None:
    provider = ScriptedProvider(
        [Reply(calls=[("picky", {"n": 1})])] * 2 + [Reply("giving up nicely")]
    )
    result, _ = await _run(provider, rounds=2)
    assert result.text == "giving up nicely"
    assert provider.requests[-1].tools == ()
    assert len(provider.requests) == 3


def test_history_drops_oldest_whole_turns() -> None:
    call = ToolCall("c1", "picky", '{"n": 1}')
    rows = [
        ("t1", Message("user", "x" * 400)),
        ("t1", Message("assistant", "", tool_calls=(call,))),
        ("t1", Message("tool", "2", tool_call_id="c1", name="picky")),
        ("t1", Message("assistant", "two")),
        ("t2", Message("user", "second")),
        ("t2", Message("assistant", "answer")),
    ]
    assert fit_history(rows, 10_000) == [m for _, m in rows]
    kept = fit_history(rows, 40)
    assert kept == [rows[4][1], rows[5][1]]
    assert fit_history(rows, 1) == []
    assert json.loads(call.arguments) == {"n": 1}


def test_history_window_matches_a_fresh_fit_as_a_session_grows() -> None:
    from agent.history import HistoryWindow

    window = HistoryWindow()
    rows: list[tuple[str, Message]] = []
    for turn in range(60):
        rows.append((f"t{turn}", Message("user", "q" * (turn * 7 % 90))))
        rows.append((f"t{turn}", Message("assistant", "a" * (turn * 13 % 150))))
        assert window.fit("s1", rows, 400) == fit_history(rows, 400)
    assert window.fit("s1", rows[:4], 400) == fit_history(rows[:4], 400)  # a shorter history resets
