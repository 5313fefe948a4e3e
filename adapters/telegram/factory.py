"""Build the Telegram channel from `channels.telegram` (imports aiogram: only when enabled)."""

from __future__ import annotations

from adapters.registry import ChannelServices
from adapters.telegram.channel import TelegramChannel
from adapters.telegram.config import TelegramConfig


def build(section: TelegramConfig, services: ChannelServices) -> TelegramChannel:
    return TelegramChannel(
        token=section.token,
        name=section.id or "telegram",
        mode=section.mode,
        api_base=section.api_base,
        webhook_secret=section.webhook_secret,
        webhook_path=section.webhook_path,
        public_url=services.public_url,
        private_edit_interval_s=section.private_edit_interval_s,
        group_edit_interval_s=section.group_edit_interval_s,
        album_wait_s=section.album_wait_s,
        drafts=section.drafts,
        guest_mode=section.guest_mode,
        menu=services.menu,
        admits=services.admits,
        budget=services.rate_budget,
        calls=services.platform_calls,
        leader=services.leader,
        accounts=services.accounts,
    )
