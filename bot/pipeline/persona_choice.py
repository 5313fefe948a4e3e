"""Which persona answers a conversation: its channel instance's (`persona:` in its section), else
the gateway's. A turn pins the one it starts with (bot/pipeline/turn.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class PersonaChoice:
    default: str = "default"
    by_channel: Mapping[str, str] = field(default_factory=dict)  # instance name -> persona

    def for_channel(self, channel: str) -> str:
        return self.by_channel.get(channel, self.default)

    def names(self) -> frozenset[str]:
        """Every persona a conversation may be answered by (checked against the library at start)."""
        return frozenset({self.default, *self.by_channel.values()})
