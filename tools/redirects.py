"""Redirect stubs: tool names the coordinator hallucinates, answered with the specialist to use."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tools.base import ToolResult

DEFAULT_PATH = Path(__file__).with_name("redirects.yaml")


@dataclass(frozen=True, slots=True)
class Redirect:
    name: str
    specialist: str
    reason: str
    why_stub_exists: str

    def result(self, arguments: str) -> ToolResult:
        """The readable redirect the model gets instead of an error that ends its plan."""
        task = f"Task for {self.specialist} (the coordinator tried {self.name} with {arguments or '{}'}): "
        payload: dict[str, Any] = {
            "status": "redirect",
            "hint": f"{self.name} is not a coordinator tool. Dispatch {self.specialist} with AgentTool.",
            "reason": self.reason,
            "suggested_call": {
                "tool": "AgentTool",
                "arguments": {
                    "subagent_type": self.specialist,
                    "description": f"{self.name.replace('_', ' ')} for the user",
                    "prompt": task + "<state the goal, the facts needed and what to return>",
                },
            },
            "why_stub_exists": self.why_stub_exists,
        }
        return ToolResult(json.dumps(payload, ensure_ascii=False), ok=False)


def load_redirects(path: Path = DEFAULT_PATH) -> Mapping[str, Redirect]:
    """Read the stub table; a malformed entry is a startup error naming the entry."""
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    redirects = {}
    for name, entry in data.items():
        try:
            redirects[name] = Redirect(
                name=name,
                specialist=entry["specialist"],
                reason=entry["reason"],
                why_stub_exists=entry["why_stub_exists"],
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(
                f"{path}: entry {name!r} needs specialist, reason and why_stub_exists ({exc})"
            ) from exc
    return redirects
