"""Build the Slack channel from `channels.slack` (imports slack-bolt: only when enabled)."""

from __future__ import annotations

from adapters.registry import ChannelServices
from adapters.slack.channel import SlackChannel
from adapters.slack.config import SlackConfig


def build(section: SlackConfig, services: ChannelServices) -> SlackChannel:
    return SlackChannel(
        bot_token=section.bot_token,
        name=section.id or "slack",
        app_token=section.app_token,
        signing_secret=section.signing_secret,
        mode=section.mode,
        path=section.path,
        api_base=section.api_base,
        updates_per_minute=section.updates_per_minute,
        edit_interval_s=section.edit_interval_s,
        streaming=section.streaming,
        agent_view=section.agent_view,
        admits=services.admits,
        budget=services.rate_budget,
        calls=services.platform_calls,
        answered=services.answered,
        latest_conversation=services.latest_conversation,
    )
