"""`channels.slack`: the Slack channel's config section (pydantic only: no slack-bolt import)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from adapters.access import InstanceConfig, secret, url_path
from adapters.registry import ChannelSpec


class SlackConfig(InstanceConfig):
    enabled: bool = False
    mode: Literal["socket", "http"] = "socket"
    path: str = "/slack/events"
    bot_token: str = secret(env="SLACK_BOT_TOKEN")
    app_token: str = secret(env="SLACK_APP_TOKEN")
    signing_secret: str = secret(env="SLACK_SIGNING_SECRET")
    api_base: str | None = None
    # chat.update is ~50 a minute per app per workspace (Tier 3), shared by every answer there.
    updates_per_minute: float = Field(45, gt=0, le=600)
    edit_interval_s: float = Field(3.0, ge=0)
    # native: Slack's streams (chat.startStream/appendStream/stopStream); update: chat.update
    streaming: Literal["native", "update"] = "native"
    # the app uses Slack's agent messaging experience (manifest features.agent_view): each
    # top-level DM message is a thread and a conversation of its own; threads are agent sessions
    agent_view: bool = False

    _check_path = field_validator("path")(url_path)

    def credential(self) -> str | None:
        return self.bot_token or None

    def routes(self) -> tuple[str, ...]:
        return (self.path,) if self.mode == "http" else ()

    @field_validator("bot_token")
    @classmethod
    def _bot_token(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("enabled") and not value.startswith("xoxb-"):
            got = "it is empty" if not value else "it does not start with xoxb-"
            raise ValueError(
                f"expected the app's Bot User OAuth Token (xoxb-...), but {got}; set "
                "SLACK_BOT_TOKEN from the app's OAuth & Permissions page"
            )
        return value

    @field_validator("app_token")
    @classmethod
    def _app_token(cls, value: str, info: ValidationInfo) -> str:
        socket = info.data.get("mode") == "socket"
        if info.data.get("enabled") and socket and not value.startswith("xapp-"):
            got = "it is empty" if not value else "it does not start with xapp-"
            raise ValueError(
                f"Socket Mode needs an app-level token (xapp-...), but {got}; set "
                "SLACK_APP_TOKEN (Basic Information → App-Level Tokens, scope "
                "connections:write), or use mode: http"
            )
        return value

    @field_validator("signing_secret")
    @classmethod
    def _signing_secret(cls, value: str, info: ValidationInfo) -> str:
        # Without it nothing proves a request came from Slack: anyone could post fake events.
        if info.data.get("enabled") and info.data.get("mode") == "http" and not value:
            raise ValueError(
                "required in http mode; set SLACK_SIGNING_SECRET from the app's "
                "Basic Information page"
            )
        return value


SPEC = ChannelSpec("slack", "adapters.slack.factory:build")
