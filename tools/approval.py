"""Approvals before sensitive tools: the seam between the tool loop and whoever says yes.

A call of a tool that needs approval (its own declaration, an MCP tool its server marks
destructive, `approvals.tools` or the persona's `approve:` globs) is not run by the loop until
the `ApprovalGate` says so. The gate (bot/approvals/) keeps every request in the store, so the
answer may come after a restart, on another process: the loop stops the turn with
`ApprovalPending`, the turn waits, and once someone presses Allow, Always allow or Deny (or the
request expires) the turn is resumed and the gate answers the same call again, this time with
"run" or with the result the model reads instead (denied, expired).

What a person reads (`readable`) and what "always allow" is scoped to (`target_of`) are here,
beside the seam, because both are about the call as the model made it.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from tools.base import ToolContext, ToolResult
from tools.registry import ToolRegistry

# The argument a call acts on, when it names one: "always allow" is then scoped to it, so
# allowing `delete_file` on one path allows no other path.
TARGET_KEYS: Final = (
    "target", "repo", "repository", "path", "file", "url", "to", "recipient", "email",
    "channel", "service", "owner",
)  # fmt: skip
MAX_SHOWN_CHARS: Final = 200  # one argument's value as a person reads it


@dataclass(frozen=True, slots=True)
class Pause:
    """The call waits for a person: request `approval_id`, shown as `prompt`."""

    approval_id: str
    prompt: str  # what the live message says: the tool, its arguments as a person reads them
    display: tuple[Mapping[str, Any], ...] = ()  # the confirm hint with the three buttons


RUN: Final = "run"
Verdict = Pause | ToolResult | str  # RUN, or the result the model reads instead, or a pause


class ApprovalGate(Protocol):
    async def check(self, name: str, arguments: Mapping[str, Any], ctx: ToolContext) -> Verdict:
        """Whether call `ctx.call_id` of tool `name` may run now: `RUN` (allowed once and
        consumed, or always allowed in this conversation), a `ToolResult` the model reads
        instead (denied, expired, already used), or a `Pause` (asked, not answered yet)."""
        ...


class ApprovalPending(Exception):
    """The turn stops here and waits for the answer to `pause` (raised out of the loop)."""

    def __init__(self, call_id: str, pause: Pause) -> None:
        super().__init__(f"call {call_id} waits for approval {pause.approval_id}")
        self.call_id = call_id
        self.pause = pause


def parsed(arguments: str | Mapping[str, Any]) -> dict[str, Any]:
    """The call's arguments as a mapping ({} when they are not a JSON object)."""
    if isinstance(arguments, Mapping):
        return dict(arguments)
    try:
        value = json.loads(arguments.strip() or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def target_of(arguments: Mapping[str, Any]) -> str:
    """What the call acts on ("" when it names nothing): the scope of an "always allow"."""
    for key in TARGET_KEYS:
        value = arguments.get(key)
        if isinstance(value, str | int | float) and str(value).strip():
            return f"{key}={str(value).strip()}"
    return ""


def readable(name: str, arguments: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The arguments as label/value rows a person reads ("Service", "ASSESSMENT")."""
    rows: list[tuple[str, str]] = []
    for key, value in arguments.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        if len(shown) > MAX_SHOWN_CHARS:
            shown = shown[: MAX_SHOWN_CHARS - 1] + "…"
        rows.append((key.replace("_", " ").capitalize(), shown))
    return rows


def asked(
    registry: ToolRegistry,
    names: Iterable[str],
    patterns: Iterable[str],
    exempt: Iterable[str] = (),
) -> frozenset[str]:
    """Which of `names` wait for a person's yes: the tools that declare it (an MCP tool marked
    destructive too) unless `exempt` names them (`approvals.exempt`: a deployment whose payment
    provider confirms each payment itself), and those `patterns` name (`approvals.tools`, a
    persona's `approve:`; globs allowed), exempt or not."""
    globs, spared = tuple(patterns), tuple(exempt)
    chosen: set[str] = set()
    for name in names:
        info = registry.info(name)
        declared = info is not None and info.approval
        if declared and any(fnmatch.fnmatchcase(name, glob) for glob in spared):
            declared = False
        if declared or any(fnmatch.fnmatchcase(name, glob) for glob in globs):
            chosen.add(name)
    return frozenset(chosen)
