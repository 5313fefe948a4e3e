"""A turn's live state in parts: what a native live message shows (`OutboundContent.live`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Step:
    """One piece of a turn's work as a live message shows it: a specialist or a labelled tool."""

    id: str  # the specialist's task id, the tool's call id
    kind: str  # agent | tool
    title: str  # as users see it: "Researcher — flights to Lisbon", "Checking the time"
    status: str = "running"  # running | completed | failed | killed | timeout

    @property
    def running(self) -> bool:
        return self.status == "running"


@dataclass(frozen=True, slots=True)
class Live:
    """A turn's live state in parts, for channels with a native live message (Slack's stream,
    Feishu's one card, Telegram's drafts) that show them apart rather than as `text`, which
    flattens them (the answer so far, then a line per running step)."""

    answer: str = ""  # the answer streamed so far; "" before it starts
    note: str = ""  # what shows while no answer has streamed: the placeholder, a SendMessage note
    steps: tuple[Step, ...] = ()  # every step so far, in the order they started, ended ones too
    language: str = "en"  # the conversation's, for the words a channel adds (a stop button)
