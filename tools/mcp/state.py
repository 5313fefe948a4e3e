"""What one MCP server's connection is doing, for /readyz, `bot mcp list` and the admin view."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

Phase = Literal["connecting", "ready", "down"]


@dataclass(frozen=True, slots=True)
class ServerState:
    """`connecting` (never connected yet), `ready`, or `down` (`reason` says why; it is retried)."""

    server: str
    transport: str
    phase: Phase = "connecting"
    reason: str = ""
    since: float = field(default_factory=time.time)  # wall clock, for people
    tools: tuple[str, ...] = ()  # the names the model sees
    protocol: str = ""  # the protocol version negotiated
    required: bool = False

    @property
    def ready(self) -> bool:
        return self.phase == "ready"

    def line(self) -> str:
        """One line for people: `files (stdio): ready, 3 tools, protocol 2026-07-28`."""
        head = f"{self.server} ({self.transport}): {self.phase}"
        if self.phase == "ready":
            return f"{head}, {len(self.tools)} tools, protocol {self.protocol}"
        return f"{head}: {self.reason}" if self.reason else head
