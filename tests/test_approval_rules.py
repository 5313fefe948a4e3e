"""Which calls wait for approval, what "always" is scoped to, and the loop's side of the seam.

The tool's own declaration, an MCP server's explicit destructive hint, `approvals.tools` and a
persona's `approve:`; `approvals.exempt`; no gate (a specialist) -> not run; two calls in one
step that both need approval -> the first waits, the second is told to come back.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest

from adapters.base import Action, ChatRef, InboundMessage
from agent.loop import LoopSettings, run_loop
from agent.persona_file import parse_persona
from agent.providers.scripted import Reply, ScriptedProvider
from agent.types import Message
from bot.approvals.policy import text_decision
from tools.approval import RUN, ApprovalPending, Pause, asked, target_of
from tools.base import ToolContext, ToolResult
from tools.builtin import builtin_registry
from tools.mcp.catalog import marked_destructive
from tools.registry import ToolRegistry, tool

ran: list[str] = []


@tool
async def delete_file(ctx: ToolContext, path: str) -> str:
    """Delete a file.

    Args:
        path: which file
    """
    ran.append(path)
    return f"deleted {path}"


@tool(approval=True)
async def send_money(ctx: ToolContext, to: str) -> str:
    """Send money.

    Args:
        to: to whom
    """
    ran.append(to)
    return f"sent to {to}"


REGISTRY = ToolRegistry([delete_file, send_money])


def _mcp_tool(**hints: Any) -> types.Tool:
    annotations = types.ToolAnnotations(**hints) if hints else None
    return types.Tool(name="t", inputSchema={"type": "object"}, annotations=annotations)


def test_an_mcp_tool_is_asked_about_only_when_marked_destructive_in_so_many_words() -> None:
    assert marked_destructive(_mcp_tool(destructiveHint=True))
    assert not marked_destructive(_mcp_tool())  # no hints: MCP's default is not enough
    assert not marked_destructive(_mcp_tool(destructiveHint=False))
    assert not marked_destructive(_mcp_tool(destructiveHint=True, readOnlyHint=True))


def test_declared_globbed_and_exempt() -> None:
    names = ["delete_file", "send_money"]
    assert asked(REGISTRY, names, ()) == {"send_money"}
    assert asked(REGISTRY, names, ("delete_*",)) == {"delete_file", "send_money"}
    assert asked(REGISTRY, names, (), exempt=("send_money",)) == frozenset()
    # exempt spares a declaration, never a name the config or the persona asks about
    assert asked(REGISTRY, names, ("send_*",), exempt=("send_money",)) == {"send_money"}
    payments = builtin_registry()
    assert asked(payments, ["create_payment", "get_current_datetime"], ()) == {"create_payment"}


def test_the_persona_names_what_it_asks_about() -> None:
    text = "---\nname: bar\ndescription: d\ntools: [delete_file]\napprove: [delete_*]\n---\nHi\n"
    persona = parse_persona(Path("personas/bar.md"), text, known_tools=["delete_file"])
    assert persona.approve == ("delete_*",)


def test_always_is_scoped_to_what_the_call_acts_on() -> None:
    assert target_of({"path": "/srv/a.txt", "mode": "rw"}) == "path=/srv/a.txt"
    assert target_of({"repo": "me/x", "title": "t"}) == "repo=me/x"
    assert target_of({"query": "anything"}) == ""


@pytest.mark.parametrize(
    ("text", "language", "decision"),
    [
        ("allow", None, "once"),
        ("Yes!", None, "once"),
        ("always", None, "always"),
        ("deny", None, "deny"),
        ("ablehnen", "de-AT", "deny"),
        ("immer", "de", "always"),
        ("allow me to explain", None, None),
        ("what now?", None, None),
    ],
)
def test_text_replies(text: str, language: str | None, decision: str | None) -> None:
    message = InboundMessage(ChatRef("telegram", "1"), "7", text, "e1", language=language)
    assert text_decision(message) == decision


def test_a_press_is_no_text_reply() -> None:
    action = Action("approval.once", "a1")
    message = InboundMessage(ChatRef("telegram", "1"), "7", "", "e1", action=action)
    assert text_decision(message) is None and action.answers_approval


class _Gate:
    """Answers from a table: tool name -> verdict (RUN, a result, or a pause)."""

    def __init__(self, verdicts: Mapping[str, Pause | ToolResult | str]) -> None:
        self.verdicts = verdicts
        self.asked: list[str] = []  # the call ids asked about, in order

    async def check(self, name: str, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        self.asked.append(ctx.call_id)
        return self.verdicts[name]


async def _loop(provider: ScriptedProvider, gate: _Gate | None) -> Any:
    async def emit(event: Any) -> None:
        pass

    return await run_loop(
        provider=provider,
        system="s",
        messages=[Message("user", "hi")],
        tools=REGISTRY.specs(["delete_file", "send_money"]),
        registry=REGISTRY,
        allowed=("delete_file", "send_money"),
        ctx=ToolContext(user_id="u1", session_id="s1", turn_id="t1"),
        emit=emit,
        settings=LoopSettings(approve=frozenset({"send_money", "delete_file"})),
        gate=gate,
    )


async def test_without_a_gate_the_call_is_not_run_and_the_model_is_told() -> None:
    ran.clear()
    provider = ScriptedProvider([Reply(calls=[("send_money", {"to": "bob"})]), Reply("Not sent.")])
    result = await _loop(provider, None)
    assert result.text == "Not sent." and ran == []
    (told,) = [m for m in provider.requests[1].messages if m.role == "tool"]
    assert "needs a person's approval" in told.content


async def test_two_calls_that_need_approval_ask_one_at_a_time() -> None:
    ran.clear()
    calls = [("send_money", {"to": "bob"}), ("delete_file", {"path": "/a"})]
    provider = ScriptedProvider([Reply(calls=calls)])
    pause = Pause("a1", "asked")
    gate = _Gate({"send_money": pause, "delete_file": pause})
    with pytest.raises(ApprovalPending) as paused:
        await _loop(provider, gate)
    assert paused.value.call_id == gate.asked[0] and paused.value.pause is pause
    assert ran == []


async def test_allowed_runs_and_a_refusal_is_the_result() -> None:
    ran.clear()
    calls = [("send_money", {"to": "bob"}), ("delete_file", {"path": "/a"})]
    provider = ScriptedProvider([Reply(calls=calls), Reply("One of two.")])
    gate = _Gate({"send_money": RUN, "delete_file": ToolResult("not run: denied", ok=False)})
    result = await _loop(provider, gate)
    assert result.text == "One of two." and ran == ["bob"]
    told = [m.content for m in provider.requests[1].messages if m.role == "tool"]
    assert told == ["sent to bob", "not run: denied"]
