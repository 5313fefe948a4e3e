"""What a turn tells the outside world while it runs: the `TurnEvent`s a delivery renders.

They live in `tools/` because control tools (SendMessage, AgentTool) emit them, and `tools`
imports none of our other packages but the neutral `content/`; the agent loop emits them too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from content.parts import Part


@dataclass(frozen=True, slots=True)
class Interim:
    """Interim text for the placeholder (SendMessage); replaced by the final answer."""

    text: str


@dataclass(frozen=True, slots=True)
class AnswerDelta:
    """A piece of the answer as the model streams it."""

    text: str


@dataclass(frozen=True, slots=True)
class AnswerReset:
    """The streamed text so far was preamble to tool calls, not the answer: drop it."""


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """A tool call began. `label`: what a channel shows while it runs ("Checking the time");
    empty for calls with no line of their own (control tools, unknown tools)."""

    call_id: str
    name: str
    label: str = ""


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """That call ended: with a result, an error or a timeout (`ok` False for the last two)."""

    call_id: str
    name: str
    label: str = ""
    ok: bool = True


@dataclass(frozen=True, slots=True)
class AgentStarted:
    """A specialist started. `subagent_type` is its internal name (logs, the model); users see
    `display_name` and `shown_description` (the persona's display_description, else the
    model's short `description` of the task), never the slug or the prompt."""

    task_id: str
    subagent_type: str
    description: str
    display_name: str = ""
    display_description: str = ""

    @property
    def shown_description(self) -> str:
        return self.display_description or self.description


@dataclass(frozen=True, slots=True)
class AgentFinished:
    task_id: str
    subagent_type: str
    description: str
    status: str  # completed | failed | killed | timeout
    display_name: str = ""  # as AgentStarted's
    display_description: str = ""

    @property
    def shown_description(self) -> str:
        return self.display_description or self.description


@dataclass(frozen=True, slots=True)
class Final:
    text: str
    display: tuple[Mapping[str, Any], ...] = ()
    parts: tuple[Part, ...] = ()  # media the answer carries (a chart, a PDF), by blob reference


@dataclass(frozen=True, slots=True)
class Failed:
    reason: str  # for the log and storage; the user sees a short apology


TurnEvent = (
    Interim
    | AnswerDelta
    | AnswerReset
    | ToolStarted
    | ToolFinished
    | AgentStarted
    | AgentFinished
    | Final
    | Failed
)
