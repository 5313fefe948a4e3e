"""Build the Feishu/Lark channel from `channels.feishu` (imports lark_oapi: only when enabled)."""

from __future__ import annotations

from adapters.feishu.channel import FeishuChannel
from adapters.feishu.config import FeishuConfig
from adapters.registry import ChannelServices


def build(section: FeishuConfig, services: ChannelServices) -> FeishuChannel:
    return FeishuChannel(
        app_id=section.app_id,
        name=section.id or "feishu",
        app_secret=section.app_secret,
        domain=section.domain,
        mode=section.mode,
        encrypt_key=section.encrypt_key,
        verification_token=section.verification_token,
        path=section.path,
        streaming=section.streaming,
        stop_button=section.stop_button,
        card_update_interval_s=section.card_update_interval_s,
        text_edit_interval_s=section.text_edit_interval_s,
        admits=services.admits,
        budget=services.rate_budget,
        calls=services.platform_calls,
        claims=services.claims,
    )
