"""`channels.feishu`: the Feishu/Lark channel's config section (pydantic only: no lark_oapi import)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from adapters.access import InstanceConfig, secret, url_path
from adapters.registry import ChannelSpec

DOMAINS = {"feishu": "https://open.feishu.cn", "lark": "https://open.larksuite.com"}
# lark-oapi's own rule (client.py::_validate_domain): https, or http on the loopback only.
_URL = re.compile(r"(https://[^/\s:]+|http://(127\.0\.0\.1|localhost|\[::1\]))(:\d{1,5})?")


def base_url(domain: str | None) -> str:
    """None, `feishu`, `lark` or a URL (a test server) → the Open API's base URL."""
    domain = domain or "feishu"
    return DOMAINS.get(domain, domain.rstrip("/"))


class FeishuConfig(InstanceConfig):
    enabled: bool = False
    app_id: str = secret(env="FEISHU_APP_ID")
    app_secret: str = secret(env="FEISHU_APP_SECRET")
    domain: str | None = None  # None: feishu
    mode: Literal["websocket", "webhook"] = "websocket"
    encrypt_key: str | None = secret(None, env="FEISHU_ENCRYPT_KEY")
    verification_token: str | None = secret(None, env="FEISHU_VERIFICATION_TOKEN")
    path: str = "/feishu/events"
    streaming: Literal["card", "text"] = "card"
    stop_button: bool = True  # a stop button on a running turn's card
    card_update_interval_s: float = Field(0.5, gt=0)
    text_edit_interval_s: float = Field(1.5, gt=0)

    _check_path = field_validator("path")(url_path)

    def credential(self) -> str | None:
        return f"{base_url(self.domain)} {self.app_id}" if self.app_id else None

    def routes(self) -> tuple[str, ...]:
        return (self.path,) if self.mode == "webhook" else ()

    @field_validator("domain")
    @classmethod
    def _known_domain(cls, value: str | None) -> str | None:
        if value is None or value in DOMAINS or _URL.fullmatch(value.rstrip("/")):
            return value
        raise ValueError(
            "expected feishu, lark, or a URL like https://open.example.com (plain http only on "
            "127.0.0.1 or localhost, with no path)"
        )

    @field_validator("app_id", "app_secret")
    @classmethod
    def _required_when_enabled(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("enabled") and not value:
            variable = "FEISHU_APP_ID" if info.field_name == "app_id" else "FEISHU_APP_SECRET"
            raise ValueError(
                f"required when the channel is enabled; set {variable} to the value on your "
                "app's Credentials & Basic Info page in the Feishu/Lark developer console"
            )
        if info.field_name == "app_id" and value and not value.startswith("cli_"):
            raise ValueError("malformed; a Feishu/Lark app id starts with cli_")
        return value

    @field_validator("encrypt_key", "verification_token")
    @classmethod
    def _needed_for_webhook(cls, value: str | None, info: ValidationInfo) -> str | None:
        # Feishu signs a callback only when an encrypt key is set: without one, anyone could
        # post events to the route. The verification token is checked inside every body too.
        if info.data.get("enabled") and info.data.get("mode") == "webhook" and not value:
            variable = (
                "FEISHU_ENCRYPT_KEY"
                if info.field_name == "encrypt_key"
                else "FEISHU_VERIFICATION_TOKEN"
            )
            raise ValueError(
                f"required in webhook mode; set {variable} to the value on your app's "
                "Events & Callbacks > Encryption Strategy page"
            )
        return value or None


SPEC = ChannelSpec("feishu", "adapters.feishu.factory:build")
