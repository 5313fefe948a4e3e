"""The config schema: pydantic section models, `Config`, and the dotted keys they define."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal, get_args, get_origin
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from tools.builtin.settings import KnowledgeSettings, ToolsSettings


def _secret(default: str | None = "", env: str | None = None) -> Any:
    """A secret, kept out of repr; `env` names the variable it comes from when the key is absent."""
    extra: dict[str, Any] = {"secret": True} | ({"env": env} if env else {})
    return Field(default, repr=False, json_schema_extra=extra)


class _Section(BaseModel):
    # Numbers become strings so an unquoted numeric chat id or password still loads as text.
    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)


def _url_path(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError("expected a URL path starting with '/'")
    return value


class ServerConfig(_Section):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)  # 0: any free port (tests)
    public_url: str | None = None


class StorageConfig(_Section):
    path: str = "data/bot.db"


class RedisConfig(_Section):
    url: str | None = None


class LogConfig(_Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"


class FallbackProvider(_Section):
    provider: Literal["anthropic", "openai", "offline"]
    model: str | None = None
    base_url: str | None = None
    api_key: str = _secret()


class LLMConfig(_Section):
    provider: Literal["auto", "anthropic", "openai", "offline"] = "auto"
    model: str | None = None
    base_url: str | None = None
    api_key: str = _secret(env="LLM_API_KEY")
    fallback: list[FallbackProvider] = []
    connect_timeout_s: float = Field(5, gt=0)
    first_token_timeout_s: float = Field(30, gt=0)
    total_timeout_s: float = Field(120, gt=0)
    max_retries: int = Field(2, ge=0, le=10)
    retry_backoff_s: float = Field(0.5, ge=0, le=60)
    tool_mode: Literal["native", "text", "auto"] = "auto"


class AgentConfig(_Section):
    max_rounds: int = Field(8, ge=1, le=50)
    tool_timeout_s: float = Field(10, gt=0)
    turn_timeout_s: float = Field(120, gt=0)
    max_workers: int = Field(4, ge=1, le=64)
    max_workers_total: int = Field(16, ge=1, le=1024)
    worker_timeout_s: float = Field(90, gt=0)
    worker_result_chars: int = Field(6000, ge=100)
    context_budget_tokens: int = Field(24000, ge=1000)
    default_timezone: str = "UTC"

    @field_validator("default_timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            expected = "expected an IANA time zone such as 'UTC' or 'Europe/Berlin'"
            raise ValueError(expected) from None
        return value


class GatewayConfig(_Section):
    dedup_ttl_s: float = Field(86400, gt=0)
    dedup_max_entries: int = Field(100000, ge=1)
    coalesce_ms: int = Field(0, ge=0, le=5000)
    allowed_users: list[str] = []
    group_reply: Literal["mention", "all"] = "mention"


class PersonasConfig(_Section):
    dirs: list[str] = ["personas"]


class WebsocketConfig(_Section):
    enabled: bool = True
    path: str = "/ws"
    allowed_origins: list[str] = ["http://127.0.0.1:8080", "http://localhost:8080"]
    identity_secret: str | None = _secret(None)
    max_frame_bytes: int = Field(65536, ge=1)
    heartbeat_s: float = Field(20, gt=0)
    rate_limit_per_minute: int = Field(30, ge=1)
    max_text_chars: int = Field(8000, ge=1)

    _check_path = field_validator("path")(_url_path)


class TelegramConfig(_Section):
    enabled: bool = False
    token: str = _secret(env="TELEGRAM_BOT_TOKEN")
    mode: Literal["polling", "webhook"] = "polling"
    api_base: str | None = None
    webhook_secret: str | None = _secret(None, env="TELEGRAM_WEBHOOK_SECRET")
    webhook_path: str = "/telegram/webhook"
    allowed_users: list[str] = []
    allowed_chats: list[str] = []
    private_edit_interval_s: float = Field(1.0, gt=0)
    group_edit_interval_s: float = Field(3.0, gt=0)

    _check_path = field_validator("webhook_path")(_url_path)

    @field_validator("token")
    @classmethod
    def _token_when_enabled(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("enabled") and not value:
            raise ValueError(
                "required when the channel is enabled; set TELEGRAM_BOT_TOKEN to "
                "the token @BotFather gave you"
            )
        return value

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


class SlackConfig(_Section):
    enabled: bool = False
    bot_token: str = _secret(env="SLACK_BOT_TOKEN")
    app_token: str = _secret(env="SLACK_APP_TOKEN")
    signing_secret: str = _secret(env="SLACK_SIGNING_SECRET")
    mode: Literal["socket", "http"] = "socket"
    api_base: str | None = None


class FeishuConfig(_Section):
    enabled: bool = False
    app_id: str = _secret(env="FEISHU_APP_ID")
    app_secret: str = _secret(env="FEISHU_APP_SECRET")
    encrypt_key: str = _secret(env="FEISHU_ENCRYPT_KEY")
    verification_token: str = _secret(env="FEISHU_VERIFICATION_TOKEN")
    domain: str | None = None


class ChannelsConfig(_Section):
    websocket: WebsocketConfig = WebsocketConfig()
    telegram: TelegramConfig = TelegramConfig()
    slack: SlackConfig = SlackConfig()
    feishu: FeishuConfig = FeishuConfig()


class Config(_Section):
    """The whole config. `Config()` is the defaults with every env-sourced secret empty."""

    server: ServerConfig = ServerConfig()
    storage: StorageConfig = StorageConfig()
    redis: RedisConfig = RedisConfig()
    log: LogConfig = LogConfig()
    llm: LLMConfig = LLMConfig()
    agent: AgentConfig = AgentConfig()
    gateway: GatewayConfig = GatewayConfig()
    personas: PersonasConfig = PersonasConfig()
    channels: ChannelsConfig = ChannelsConfig()
    knowledge: KnowledgeSettings = KnowledgeSettings()  # defined beside the tools that read it
    tools: ToolsSettings = ToolsSettings()


def item_model(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds, directly or as list items; None for plain values."""
    if get_origin(annotation) is list:
        annotation = get_args(annotation)[0]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def config_keys() -> list[str]:
    """Every dotted key of the schema, sections included; list items appear without an index."""
    return list(_keys(Config, ""))


def _keys(model: type[BaseModel], prefix: str) -> Iterator[str]:
    for name, field in model.model_fields.items():
        yield prefix + name
        sub = item_model(field.annotation)
        if sub is not None:
            yield from _keys(sub, f"{prefix}{name}.")
