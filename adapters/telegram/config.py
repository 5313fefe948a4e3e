"""`channels.telegram`: the Telegram channel's config section (pydantic only: no aiogram import)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from adapters.access import InstanceConfig, secret, url_path
from adapters.registry import ChannelSpec


def _token_shape_ok(token: str) -> bool:
    """aiogram's own check (aiogram.utils.token.validate_token), without importing aiogram."""
    left, sep, right = token.partition(":")
    return not any(c.isspace() for c in token) and bool(sep) and left.isdigit() and bool(right)


class TelegramConfig(InstanceConfig):
    enabled: bool = False
    token: str = secret(env="TELEGRAM_BOT_TOKEN")
    mode: Literal["polling", "webhook"] = "polling"
    api_base: str | None = None
    webhook_secret: str | None = secret(None, env="TELEGRAM_WEBHOOK_SECRET")
    webhook_path: str = "/telegram/webhook"
    private_edit_interval_s: float = Field(1.0, gt=0)
    group_edit_interval_s: float = Field(3.0, gt=0)
    # an album's photos and files are one message once none came for this long
    album_wait_s: float = Field(0.8, gt=0, le=10)
    # private chats stream through live drafts (sendMessageDraft); off: a message edited
    drafts: Literal["auto", "off"] = "auto"
    # guest summons (Bot API 10.0) answered through answerGuestQuery
    guest_mode: bool = False

    _check_path = field_validator("webhook_path")(url_path)

    @field_validator("token")
    @classmethod
    def _token_when_enabled(cls, value: str, info: ValidationInfo) -> str:
        # Only a channel that runs needs it: the variable may be set for another config.
        if not info.data.get("enabled"):
            return value
        if not value:
            raise ValueError(
                "required when the channel is enabled; set TELEGRAM_BOT_TOKEN to "
                "the token @BotFather gave you"
            )
        if not _token_shape_ok(value):
            raise ValueError(
                "malformed; expected the token @BotFather gave you, digits:letters"
                " (like 123456789:AA...), with no spaces"
            )
        return value

    def credential(self) -> str | None:
        return self.token or None

    def routes(self) -> tuple[str, ...]:
        return (self.webhook_path,) if self.mode == "webhook" else ()

    @field_validator("webhook_secret")
    @classmethod
    def _secret_for_webhook(cls, value: str | None, info: ValidationInfo) -> str | None:
        # Without it aiogram-style handlers accept any POST: anyone could forge updates.
        if info.data.get("enabled") and info.data.get("mode") == "webhook" and not value:
            raise ValueError(
                "required in webhook mode; set TELEGRAM_WEBHOOK_SECRET to 1-256 "
                "characters from A-Z a-z 0-9 _ -"
            )
        return value or None


SPEC = ChannelSpec("telegram", "adapters.telegram.factory:build")
