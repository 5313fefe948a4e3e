"""The Slack channel (slack-bolt): Socket Mode or HTTP events, threads, paced chat.update edits."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from adapters.slack.channel import SlackChannel

__all__ = ["SlackChannel"]


def __getattr__(name: str) -> Any:
    # Lazy: `adapters.slack.config` is read by every config load and must not import slack-bolt.
    if name == "SlackChannel":
        from adapters.slack.channel import SlackChannel

        return SlackChannel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
