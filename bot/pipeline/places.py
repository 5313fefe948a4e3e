"""Where operators work: `slack:<instance>/<channel id>`, a Slack instance the gateway runs and a
channel in it. `approvals.place`, `pairing.place` and `handoff.place` all name one this way."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

PATTERN: Final = re.compile(
    r"slack:(?P<instance>[A-Za-z0-9][A-Za-z0-9_.-]{0,63})/(?P<chat>[A-Z0-9]{1,64})"
)


@dataclass(frozen=True, slots=True)
class Place:
    instance: str  # the channel instance's id (`channels.slack[].id`): `ChatRef.channel`
    chat_id: str  # the channel's id (C0123456789)

    @property
    def key(self) -> str:
        """The conversation key prefix of the channel's messages (and of its threads)."""
        return f"{self.instance}:{self.chat_id}"


def parse_place(value: str) -> Place:
    found = PATTERN.fullmatch(value.strip())
    if found is None:
        raise ValueError(
            f"expected slack:<instance>/<channel id>, e.g. slack:slack/C0123456789; got {value!r}"
        )
    return Place(found["instance"], found["chat"])
