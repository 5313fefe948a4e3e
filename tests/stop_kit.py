"""A turn with all the work a stop must end: the coordinator's own MCP call, a background and a
foreground specialist, the background one in an MCP call, the foreground one in a model stream
the fake provider holds open. Used by the stop tests and bench/stop_bench.py.

The model is the fake OpenAI server (the real SDK streams from it) and the tools are the demo
MCP server over stdio (tests/mcp_servers/demo.py): what a stop ended is read off the fakes, the
streams the fake saw closed and the calls the MCP server logged as cancelled.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.fake_llm import Call, Reply, llm_config
from tests.fake_openai import FakeOpenAI

ROOT = Path(__file__).resolve().parent.parent
DEMO = str(ROOT / "tests" / "mcp_servers" / "demo.py")
WAIT_S = 60.0  # a hang guard on a loaded machine, never a speed bound

PERSONAS = {
    "default": """---
name: default
description: Coordinates the stop test's specialists.
tools: [mcp__demo__slow]
---
ROLE:coordinator You dispatch the specialists.
""",
    "specialist-alpha": """---
name: specialist-alpha
description: Waits on the demo server in the background.
tools: [mcp__demo__slow]
---
ROLE:alpha You call the slow tool.
""",
    "specialist-beta": """---
name: specialist-beta
description: Thinks for a long time.
tools: [mcp__demo__slow]
---
ROLE:beta You think.
""",
}
# what the coordinator's first answer streams before the fake holds it (the "answer" shape)
STREAMED = ("Here is ", "the start")


def write_personas(folder: Path) -> Path:
    personas = folder / "personas"
    personas.mkdir(exist_ok=True)
    for name, text in PERSONAS.items():
        (personas / f"{name}.md").write_text(text)
    return personas


def _agent(kind: str, background: bool) -> Call:
    prompt = f"Please do the long {kind} task now and report back what you found in the end."
    arguments = {
        "description": f"{kind} task",
        "subagent_type": f"specialist-{kind}",
        "prompt": prompt,
        "background": background,
    }
    return Call("AgentTool", json.dumps(arguments))


SLOW = Call("mcp__demo__slow", json.dumps({"seconds": 600}))


class StopModel(FakeOpenAI):
    """The fake OpenAI server scripted by persona. `shape` is "work" (the coordinator dispatches
    both specialists and calls the slow tool itself) or "answer" (it streams `STREAMED`, then
    the stream is held open). A specialist's stream: alpha calls the slow tool, beta's text is
    held open. Each turn starts so (a request ending with the user's message); anything asked
    after a tool result is an answer that must never be needed."""

    def __init__(self, shape: str = "work") -> None:
        super().__init__(script=self._reply)
        self.shape = shape
        self.asked: list[str] = []  # who each request came from, in order

    def _reply(self, body: dict[str, Any]) -> Reply:
        system = json.dumps(body["messages"][0])
        who = next((r for r in ("alpha", "beta", "coordinator") if f"ROLE:{r}" in system), "other")
        self.asked.append(who)
        if body["messages"][-1]["role"] != "user":  # a tool's result came back: too late
            return Reply(text=["an answer nobody should have asked for"])
        if who == "alpha":
            return Reply(calls=[SLOW])
        if who == "beta":
            return Reply(text=["Beta is thinking"], stall_after=2)
        if who == "coordinator":
            if self.shape == "answer":
                return Reply(text=list(STREAMED), stall_after=1 + len(STREAMED))
            return Reply(calls=[_agent("alpha", True), _agent("beta", False), SLOW])
        return Reply(text=["an answer nobody should have asked for"])


def sections(folder: Path, model: FakeOpenAI, log: Path) -> dict[str, Any]:
    """The app's config sections: the personas above, the model, the demo MCP server."""
    servers = {"demo": {"command": sys.executable, "args": [DEMO, "--log", str(log)]}}
    return {
        "personas": {"dirs": [str(write_personas(folder))]},
        "llm": llm_config(
            "openai", model, first_token_timeout_s=120, total_timeout_s=240, max_retries=0
        ),
        "agent": {"turn_timeout_s": 240},
        "mcp": {"servers": servers},
    }


def log_count(log: Path, text: str) -> int:
    return log.read_text().count(text) if log.exists() else 0
