"""Test kit for the coordinator: specialist personas, recording tools, a model routed by persona."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.providers.scripted import Reply
from agent.types import ModelRequest
from tools.base import ToolContext, ToolResult
from tools.builtin import builtin_registry
from tools.registry import ToolRegistry, tool

ROOT = Path(__file__).resolve().parent.parent

SPECIALISTS = {
    "specialist-a": (
        "Finds facts in the archive.",
        ["lookup", "slow_tool"],
        "You are SPECIALIST-A.",
    ),
    "specialist-b": ("Does arithmetic.", ["calc", "make_card"], "You are SPECIALIST-B."),
}
DISPLAY_NAMES = {"specialist-a": "Fact finder"}  # what users see; specialist-b's is made: "B"


def write_personas(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "default.md").write_text((ROOT / "personas" / "default.md").read_text())
    for name, (description, tools, body) in SPECIALISTS.items():
        (folder / f"{name}.md").write_text(
            f"---\nname: {name}\ndescription: {description}\ntools: {json.dumps(tools)}\n"
            + (f"display_name: {DISPLAY_NAMES[name]}\n" if name in DISPLAY_NAMES else "")
            + f"---\n{body}\n"
        )
    return folder


class Probe:
    """What the test tools saw: calls, and cancellations that reached a tool in flight."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []  # (tool, argument, session id)
        self.cancelled: list[str] = []
        self.slow_started = asyncio.Event()
        self.release = asyncio.Event()


def registry_with(probe: Probe) -> ToolRegistry:
    @tool
    async def lookup(ctx: ToolContext, query: str) -> str:
        """Look a fact up.

        Args:
            query: what to look up
        """
        probe.calls.append(("lookup", query, ctx.session_id))
        return f"fact about {query}"

    @tool
    async def calc(ctx: ToolContext, expression: str) -> str:
        """Compute an expression.

        Args:
            expression: arithmetic
        """
        probe.calls.append(("calc", expression, ctx.session_id))
        return "42"

    @tool(timeout_s=30)
    async def slow_tool(ctx: ToolContext) -> str:
        """Take a long time."""
        probe.calls.append(("slow_tool", "", ctx.session_id))
        probe.slow_started.set()
        try:
            await probe.release.wait()
        except asyncio.CancelledError:
            probe.cancelled.append(ctx.session_id)
            raise
        return "slow result"

    @tool
    async def make_card(ctx: ToolContext) -> ToolResult:
        """Make a card for the user."""
        return ToolResult("card made", display=({"type": "card", "title": "Order 7"},))

    registry = builtin_registry()
    for extra in (lookup, calc, slow_tool, make_card):
        registry.add(extra)
    return registry


Step = Reply | Callable[[ModelRequest], Reply]


class Router:
    """A scripted model that answers each persona from its own script (picked by its prompt)."""

    MARKERS = {"SPECIALIST-A": "specialist-a", "SPECIALIST-B": "specialist-b"}

    def __init__(self, **scripts: list[Step]) -> None:
        self.scripts = {name.replace("_", "-"): list(steps) for name, steps in scripts.items()}
        self.seen: dict[str, list[ModelRequest]] = {}

    def __call__(self, request: ModelRequest) -> Reply:
        who = next(
            (name for marker, name in self.MARKERS.items() if marker in request.system), "default"
        )
        self.seen.setdefault(who, []).append(request)
        script = self.scripts.get(who)
        if not script:
            raise AssertionError(f"no scripted reply left for {who} (call #{len(self.seen[who])})")
        step = script.pop(0)
        return step if isinstance(step, Reply) else step(request)


def dispatch(
    subagent_type: str, prompt: str, *, background: bool = False, description: str = "a task"
) -> tuple[str, dict[str, object]]:
    return (
        "AgentTool",
        {
            "description": description,
            "subagent_type": subagent_type,
            "prompt": prompt,
            "background": background,
        },
    )


def last_tool_results(request: ModelRequest) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    for message in reversed(request.messages):
        if message.role != "tool":
            break
        try:
            results.insert(0, json.loads(message.content))
        except ValueError:
            results.insert(0, {"text": message.content, "is_error": message.is_error})
    return results


TASK = "Find the archived fact about the 1969 moon landing crew and return it in one sentence."
SUM = "Compute 6 times 7 exactly and return only the number, nothing else at all."
