"""What a specialist dispatch is: its limits, its running task, and the result it hands back.

`agent/workers.py` runs the dispatches; these records are what it keeps per task and what a
background task's result becomes for the gateway (a new turn in the same conversation).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.loop import LoopSettings
from content.parts import Part
from tools.base import ToolContext


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    max_per_turn: int = 4
    max_total: int = 16
    timeout_s: float = 300.0
    result_chars: int = 6000
    loop: LoopSettings = field(default_factory=LoopSettings)  # the coordinator's too


@dataclass(frozen=True, slots=True)
class BackgroundResult:
    task_id: str
    subagent_type: str
    description: str
    status: str
    text: str
    conversation_key: str
    channel: str
    user_id: str
    # media its tools made (a chart): the turn that delivers the result carries them to the user
    parts: tuple[Part, ...] = ()

    def result_text(self) -> str:
        return self.text or f"(no result: the task ended with status {self.status})"


Deliver = Callable[[BackgroundResult], Awaitable[None]]


@dataclass(slots=True)
class WorkerTask:
    task_id: str
    subagent_type: str
    description: str
    prompt: str
    background: bool
    parent: ToolContext
    session_id: str | None = None
    display_name: str = ""  # what users see of the persona (its slug never)
    display_description: str = ""
    status: str = "running"  # running | completed | failed | killed | timeout
    result: str = ""
    display: tuple[Mapping[str, Any], ...] = ()  # e.g. a payment card made by the specialist
    parts: tuple[Part, ...] = ()  # media its tools made (a chart): the parent's answer carries them
    task: asyncio.Task[None] | None = None
    waiters: int = 0
    # A background result is delivered as a new turn unless a foreground call waits for it
    deliver_later: bool = False
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def summary(self) -> dict[str, Any]:
        summary = {
            "task_id": self.task_id,
            "subagent_type": self.subagent_type,
            "display_name": self.display_name,  # so the coordinator names it as users see it
            "status": self.status,
        }
        if self.session_id:
            summary["session_id"] = self.session_id
        return summary
