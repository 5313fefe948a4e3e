"""The config schema: pydantic section models, `Config`, and the dotted keys they define."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import Any, Literal, get_args, get_origin
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, Field, ValidationInfo, field_validator

from adapters.access import secret
from adapters.api.config import ApiConfig
from adapters.feishu.config import FeishuConfig
from adapters.slack.config import SlackConfig
from adapters.telegram.config import TelegramConfig
from adapters.websocket.config import WebsocketConfig
from bot.runtime.config.choices import ModelChoice
from bot.runtime.config.choices import ModelPrice as ModelPrice  # where it always was
from bot.runtime.config.handoff import HandoffConfig
from bot.runtime.config.instances import INSTANCE_KINDS, INSTANCES, as_instances
from bot.runtime.config.people import ApprovalsConfig, PairingConfig
from bot.runtime.config.section import Section as _Section
from bot.runtime.event_loop import EventLoopChoice, uvloop_installed
from bot.schedules.settings import SchedulesConfig
from content.texts import LANGUAGES, negotiate
from tools.mcp.settings import McpSettings
from tools.settings import KnowledgeSettings, ToolsSettings

ADMIN_TOKEN_MIN = 16  # a shorter token falls to guessing despite the sign-in throttle


class ServerConfig(_Section):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)  # 0: any free port (tests)
    public_url: str | None = None
    # a connection that has not sent a whole request head this long after connecting or after
    # its last answer is closed: idle keep-alive connections and slow header writers alike
    idle_timeout_s: float = Field(15, gt=0, le=3600)
    # connections open at once; past it a new one gets a bare 503 (bot/runtime/listener.py).
    # None: three quarters of the open-file limit, the rest for storage, Redis, the model
    max_connections: int | None = Field(None, ge=1)
    # auto: uvloop where it is installed, else asyncio's own (bot/runtime/event_loop.py)
    event_loop: EventLoopChoice = "auto"

    @field_validator("event_loop")
    @classmethod
    def _installed(cls, value: EventLoopChoice) -> EventLoopChoice:
        if value == "uvloop" and not uvloop_installed():
            raise ValueError("uvloop is not installed (pip install uvloop), or choose auto")
        return value


class StorageConfig(_Section):
    path: str = "data/bot.db"  # SQLite, the embedded default; unused when `url` is set
    # postgresql://user@host:5432/db: PostgreSQL, for processes on several hosts. A secret (it
    # may hold a password): write `${DATABASE_URL}` and keep the value in the environment.
    url: str | None = secret(None)
    # true: refuse to start when `url` is empty (an unset ${DATABASE_URL}) instead of SQLite
    require_url: bool = False

    @field_validator("url")
    @classmethod
    def _postgresql_only(cls, value: str | None) -> str | None:
        if not value:
            return None  # an unset `${DATABASE_URL}` expands to ""
        if value.partition("://")[0] not in ("postgresql", "postgres"):
            raise ValueError(
                "expected a postgresql:// url such as postgresql://db.internal:5432/bot"
                " (leave it unset for SQLite at storage.path)"
            )
        return value


class RedisConfig(_Section):
    """Set `url` and every `bot serve` pointed at it shares dedup, turns, events and rate budgets."""

    # redis://host:6379/0, rediss:// for TLS; None: one process, embedded. It may hold a password.
    url: str | None = secret(None)
    prefix: str = "bot:"  # every key starts with it: several bots may share one Redis
    lease_s: float = Field(5, ge=1, le=300)  # a dead process's turns and polling move on after it
    # true: refuse to start when `url` is empty (an unset ${REDIS_URL}) instead of one process
    required: bool = False

    @field_validator("url")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        if not value:
            return None  # an unset `${REDIS_URL}` expands to ""
        scheme = value.partition("://")[0].lower()
        if "://" not in value or scheme not in ("redis", "rediss", "unix"):
            # the value may hold a password: it is not repeated
            raise ValueError(
                "expected a Redis URL such as redis://host:6379/0 (rediss:// for TLS,"
                " unix:///path/to/redis.sock for a socket)"
            )
        return value


class LogConfig(_Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    format: Literal["text", "json"] = "text"


# what a model takes natively besides text; null: known per vendor (agent/providers/media.py)
MediaKinds = list[Literal["image", "file"]] | None


class FallbackProvider(_Section):
    provider: Literal["anthropic", "openai", "offline"]
    model: str | None = None
    base_url: str | None = None
    api_key: str = secret()
    media: MediaKinds = None


class LLMConfig(_Section):
    provider: Literal["auto", "anthropic", "openai", "offline"] = "auto"
    model: str | None = None
    base_url: str | None = None
    api_key: str = secret(env="LLM_API_KEY")
    fallback: list[FallbackProvider] = []
    connect_timeout_s: float = Field(5, gt=0)
    first_token_timeout_s: float = Field(30, gt=0)
    total_timeout_s: float = Field(120, gt=0)
    max_retries: int = Field(2, ge=0, le=10)
    retry_backoff_s: float = Field(0.5, ge=0, le=60)
    circuit_open_s: float = Field(30, gt=0, le=3600)
    tool_mode: Literal["native", "text", "auto"] = "auto"
    media: MediaKinds = None
    # how many of a history's newest images go to the model again as images; older ones go as
    # their description (agent/providers/image_plan.py)
    media_history_images: int = Field(4, ge=0, le=100)
    # the models a conversation may switch to with /model (bot/runtime/config/choices.py)
    choices: list[ModelChoice] = []


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
    resume_max_age_s: float = Field(900, ge=0)
    resume_max_attempts: int = Field(2, ge=0, le=10)

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
    coalesce_ms: int = Field(0, ge=0, le=5000)
    allowed_users: list[str] = []
    group_reply: Literal["mention", "all"] = "mention"
    # the gateway's own texts where neither the user's nor the persona's language is known
    language: str = "en"

    @field_validator("language")
    @classmethod
    def _spoken(cls, language: str) -> str:
        if (ours := negotiate(language)) is None:
            raise ValueError(f"no texts in {language!r}; one of {', '.join(LANGUAGES)}")
        return ours


class UsageConfig(_Section):
    # keyed by the model name as recorded in `usage.model`; a model without a price costs "-"
    prices: dict[str, ModelPrice] = {}


class QuotaLimits(_Section):
    """Unset (null) limits do not apply; a turn past a reached limit is refused, not the call."""

    turns_per_minute: int | None = Field(None, ge=0)
    turns_per_day: int | None = Field(None, ge=0)
    tokens_per_minute: int | None = Field(None, ge=0)
    tokens_per_day: int | None = Field(None, ge=0)
    # past this share of any limit above, the conversation moves to `quotas.soft_model` and
    # no specialist is dispatched (the user told once); None: no soft limit
    soft_ratio: float | None = Field(None, gt=0, lt=1)


class QuotasConfig(_Section):
    per_user: QuotaLimits = QuotaLimits()
    per_conversation: QuotaLimits = QuotaLimits()
    # every visitor id one network address opens (web socket); every session of one API key
    per_address: QuotaLimits = QuotaLimits()
    per_api_key: QuotaLimits = QuotaLimits()
    exempt_users: list[str] = []  # user ids, or `channel:user_id`
    soft_model: str | None = None  # the llm.choices name past a scope's soft_ratio
    # a day whose spend is more than this many times its 7-day median is an alert (0: off)
    cost_alert_factor: float = Field(3.0, ge=0)

    @field_validator("exempt_users")
    @classmethod
    def _no_visitors(cls, users: list[str]) -> list[str]:
        for user in users:
            if user.startswith(("v:", "websocket:v:")):
                raise ValueError(
                    f"{user!r} is a web visitor id, which the browser chooses: anyone could "
                    "claim it and skip every quota; exempt a signed web user "
                    "(websocket:u:<user_id>) instead"
                )
        return users


class AdminConfig(_Section):
    token: str = secret(env="BOT_ADMIN_TOKEN")  # empty: no /admin at all
    allow_remote: bool = False  # true: also from non-loopback addresses (behind your own TLS)
    # proxies (addresses or networks) whose X-Forwarded-For names the client; a request that
    # any other peer relayed (any forwarding header) has no known client: refused unless remote
    trusted_proxies: list[str] = []

    @field_validator("token")
    @classmethod
    def _long_enough(cls, value: str) -> str:
        if value and len(value) < ADMIN_TOKEN_MIN:  # the value is a secret: it is not repeated
            raise ValueError(
                f"expected at least {ADMIN_TOKEN_MIN} characters (`openssl rand -hex 24` makes"
                " a good one), or empty to turn /admin off"
            )
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, values: list[str]) -> list[str]:
        for value in values:
            try:
                ipaddress.ip_network(value)
            except ValueError:
                raise ValueError(
                    f"{value!r} is not an address or network (such as 127.0.0.1 or 10.0.0.0/8)"
                ) from None
        return values


class MediaConfig(_Section):
    """Where the bytes of images, files and voice notes live, and for how long."""

    dir: str = "data/media"  # files on disk (the embedded default); relative to the config file
    max_bytes: int = Field(20_000_000, ge=1)  # a larger file is refused, nothing of it kept
    retention_days: float = Field(30, gt=0)  # older blobs are removed (hourly)
    # auto: the database when storage.url is PostgreSQL (several hosts share it), else disk
    store: Literal["auto", "disk", "database"] = "auto"
    # signs the expiring blob links handed to browsers; empty: a random one kept in `dir`
    # (processes sharing the folder agree). Several hosts: set it, the same on each.
    url_secret: str = secret(env="BOT_MEDIA_SECRET")
    url_ttl_s: float = Field(3600, gt=0, le=7 * 86400)  # how long a signed link works

    @field_validator("url_secret")
    @classmethod
    def _long_enough(cls, value: str) -> str:
        if value and len(value) < 16:  # the value is a secret: it is not repeated
            raise ValueError(
                "expected at least 16 characters (`openssl rand -hex 32` makes a good one),"
                " or empty for a random one kept in media.dir"
            )
        return value


class SttConfig(_Section):
    """Speech to text for voice notes: an OpenAI-compatible `POST {base_url}/audio/transcriptions`
    (OpenAI's own, or a Whisper server run anywhere). Off while `base_url` is null: a voice note
    then gets its sender told that voice is not on."""

    base_url: str | None = None  # e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1
    model: str = "whisper-1"
    api_key: str = secret(env="STT_API_KEY")
    language: str | None = None  # an ISO-639-1 hint such as "en"; null: the server detects it
    timeout_s: float = Field(30, gt=0, le=600)  # each request's deadline (one retry on a 5xx)
    max_bytes: int = Field(25_000_000, ge=1)  # OpenAI's limit: a larger voice note is not sent
    concurrency: int = Field(4, ge=1, le=64)  # transcriptions at once, in this process

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if not value:
            return None  # an unset `${STT_BASE_URL:-}` expands to ""
        if value.partition("://")[0].lower() not in ("http", "https"):
            raise ValueError(
                "expected an http(s) URL of an OpenAI-compatible API, such as"
                " https://api.openai.com/v1 (null: voice notes are not transcribed)"
            )
        return value


class PersonasConfig(_Section):
    dirs: list[str] = ["personas"]
    switchable: list[str] = []  # personas a conversation may switch to with /persona


class ChannelsConfig(_Section):
    """One section per channel, each defined in its adapter package. Telegram, Slack and Feishu
    take a list of instances too (bot/runtime/config/instances.py): validated, each is a list."""

    websocket: WebsocketConfig = WebsocketConfig()
    telegram: list[TelegramConfig] = Field([TelegramConfig(id="telegram")], **INSTANCES)
    slack: list[SlackConfig] = Field([SlackConfig(id="slack")], **INSTANCES)
    api: ApiConfig = ApiConfig()
    feishu: list[FeishuConfig] = Field([FeishuConfig(id="feishu")], **INSTANCES)

    @field_validator(*INSTANCE_KINDS, mode="before")
    @classmethod
    def _instances(cls, value: Any, info: ValidationInfo) -> Any:
        return as_instances(str(info.field_name), value)


class Config(_Section):
    """The whole config. `Config()` is the defaults with every env-sourced secret empty."""

    server: ServerConfig = ServerConfig()
    storage: StorageConfig = StorageConfig()
    redis: RedisConfig = RedisConfig()
    log: LogConfig = LogConfig()
    llm: LLMConfig = LLMConfig()
    agent: AgentConfig = AgentConfig()
    gateway: GatewayConfig = GatewayConfig()
    pairing: PairingConfig = PairingConfig()  # codes for unknown senders (dm_policy: pairing)
    personas: PersonasConfig = PersonasConfig()
    channels: ChannelsConfig = ChannelsConfig()
    knowledge: KnowledgeSettings = KnowledgeSettings()  # defined beside the tools that read it
    tools: ToolsSettings = ToolsSettings()
    usage: UsageConfig = UsageConfig()
    quotas: QuotasConfig = QuotasConfig()
    media: MediaConfig = MediaConfig()
    stt: SttConfig = SttConfig()  # speech to text (voice notes); off while stt.base_url is null
    mcp: McpSettings = McpSettings()  # tool servers, defined beside the MCP source
    admin: AdminConfig = AdminConfig()
    approvals: ApprovalsConfig = ApprovalsConfig()
    schedules: SchedulesConfig = SchedulesConfig()  # scheduled messages (bot/schedules/)
    handoff: HandoffConfig = HandoffConfig()  # a person takes over (bot/handoff/)


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
