"""config.yaml: pydantic models, `${VAR}` expansion from the environment, one-line errors."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, get_args, get_origin
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic.fields import FieldInfo

from tools.builtin.settings import KnowledgeSettings, ToolsSettings

log = logging.getLogger(__name__)

DEFAULT_PATH = "config.yaml"


class ConfigError(Exception):
    """The config cannot be used. str() is one line: `source: dotted.key: what is expected`."""


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


# `$${` is an escaped literal; a bare `${` that is not a well-formed reference is an error.
_REFERENCE = re.compile(r"\$\$\{|\$\{(?:([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\})?")


def expand_env(value: Any, env: Mapping[str, str]) -> Any:
    """Expand `${VAR}` / `${VAR:-default}` in every string inside `value` (mapping keys excepted).

    An unset `${VAR}` becomes ""; `:-default` applies when VAR is unset or empty; `$${` is `${`.
    A malformed reference raises ConfigError naming its dotted key.
    """
    return _expand(value, env, "")


def _expand(value: Any, env: Mapping[str, str], key: str) -> Any:
    if isinstance(value, str):
        return _expand_str(value, env, key)
    if isinstance(value, Mapping):
        return {k: _expand(v, env, f"{key}{k}.") for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, env, f"{key}{i}.") for i, v in enumerate(value)]
    return value


def _expand_str(text: str, env: Mapping[str, str], key: str) -> str:
    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$${":
            return "${"
        name, default = match.group(1), match.group(2)
        if name is None:
            where = f"{key[:-1]}: " if key else ""
            raise ConfigError(
                f"{where}bad reference in {text!r}; write ${{NAME}} or ${{NAME:-default}},"
                " or $${ for a literal ${"
            )
        found = env.get(name, "")
        return default if default is not None and not found else found

    return _REFERENCE.sub(replace, text)


class _Loader(yaml.SafeLoader):
    """A SafeLoader that refuses duplicate keys (plain YAML silently keeps the last one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, str):
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r}", key_node.start_mark
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_config(path: str | Path | None = None, *, env: Mapping[str, str] | None = None) -> Config:
    """Read, expand and validate a config file; None: ./config.yaml if present, else defaults."""
    env = os.environ if env is None else env
    if path is None:
        if not Path(DEFAULT_PATH).is_file():
            log.info("no %s in %s; using the built-in defaults", DEFAULT_PATH, Path.cwd())
            return _validate({}, env, "defaults")
        path = DEFAULT_PATH
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{source}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{source}: cannot read: {exc}") from exc
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}: " if mark else ""
        raise ConfigError(f"{source}: {where}invalid YAML: {exc.problem or exc.context}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: invalid YAML: {str(exc).splitlines()[0]}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: expected a mapping of sections ({', '.join(Config.model_fields)})"
            f" at the top level, got {_show(data)}"
        )
    config = _validate(data, env, source)
    log.debug("loaded config from %s", source)
    return config


def _validate(data: dict[Any, Any], env: Mapping[str, str], source: str) -> Config:
    try:
        _prepare(Config, data, "")
        return Config.model_validate(expand_env(data, env))
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from exc
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_describe(exc.errors()[0])}") from exc


def _prepare(model: type[BaseModel], data: dict[Any, Any], key: str) -> None:
    """Fill env-sourced secrets the file leaves out, and treat an empty section as defaults."""
    for name in data:
        if not isinstance(name, str):
            raise ConfigError(
                f"{key}{name}: keys must be strings; quote it (YAML reads "
                "unquoted on/off/yes/no/null and numbers as other types)"
            )
    for name, field in model.model_fields.items():
        sub = _item_model(field.annotation)
        if sub is not None and field.annotation is sub and data.get(name) is None:
            data[name] = {}  # a section whose keys are all commented out parses as null
        value = data.get(name)
        if sub is not None and isinstance(value, dict):
            _prepare(sub, value, f"{key}{name}.")
        elif sub is not None and isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    _prepare(sub, item, f"{key}{name}.{i}.")
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        if name not in data and "env" in extra:
            data[name] = f"${{{extra['env']}:-}}"
        elif extra.get("secret") and value not in (None, "") and "${" not in str(value):
            log.warning(
                "%s%s is written in the config file; secrets belong in the environment:"
                " use ${VAR} and set VAR",
                key,
                name,
            )


def _item_model(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds, directly or as list items; None for plain values."""
    if get_origin(annotation) is list:
        annotation = get_args(annotation)[0]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


_EXPECTED = {
    "bool_parsing": "true or false",
    "bool_type": "true or false",
    "string_type": "a string",
    "list_type": "a list",
    "model_type": "a mapping",
    "dict_type": "a mapping",
}


def _describe(error: Mapping[str, Any]) -> str:
    """`dotted.key: what is expected, got X` for one pydantic error."""
    loc = tuple(error["loc"])
    key = ".".join(str(part) for part in loc)
    if error["type"] == "extra_forbidden":
        parent = _item_model(_resolve(loc[:-1])[1])
        known = ", ".join(sorted(parent.model_fields)) if parent else ""
        return f"{key}: unknown key; expected one of: {known}"
    field, annotation = _resolve(loc)
    metadata = field.metadata if field is not None and annotation is field.annotation else []
    if get_origin(annotation) is Literal:
        expected = "one of " + ", ".join(repr(choice) for choice in get_args(annotation))
    elif annotation in (int, float):
        expected = _number(annotation, metadata)
    elif error["type"] == "value_error":
        return f"{key}: {error['ctx']['error']}, got {_show(error['input'])}"
    else:
        msg = str(error["msg"])
        expected = _EXPECTED.get(error["type"], f"a valid value ({msg[:1].lower()}{msg[1:]})")
    if error["type"] == "missing":
        return f"{key}: required; expected {expected}"
    return f"{key}: expected {expected}, got {_show(error['input'])}"


def _resolve(loc: tuple[Any, ...]) -> tuple[FieldInfo | None, Any]:
    """The field named by `loc` and its annotation, unwrapped to the item type at a list index."""
    field: FieldInfo | None = None
    annotation: Any = Config
    for part in loc:
        if get_origin(annotation) is list:
            annotation = get_args(annotation)[0]
            if isinstance(part, int):
                continue
        model = _item_model(annotation)
        if model is None or part not in model.model_fields:
            return None, None
        field = model.model_fields[part]
        annotation = field.annotation
    return field, annotation


def _number(kind: type, metadata: list[Any]) -> str:
    noun = "an integer" if kind is int else "a number"
    ops = ("ge", "gt", "le", "lt")
    bounds = {op: getattr(m, op) for m in metadata for op in ops if hasattr(m, op)}
    if "ge" in bounds and "le" in bounds:
        return f"{noun} between {bounds['ge']} and {bounds['le']}"
    signs = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}
    limits = " and ".join(f"{signs[op]} {bound}" for op, bound in bounds.items())
    return f"{noun} {limits}" if limits else noun


def _show(value: Any) -> str:
    """A value as the user wrote it in YAML, short."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def config_keys() -> list[str]:
    """Every dotted key of the schema, sections included; list items appear without an index."""
    return list(_keys(Config, ""))


def _keys(model: type[BaseModel], prefix: str) -> Iterator[str]:
    for name, field in model.model_fields.items():
        yield prefix + name
        sub = _item_model(field.annotation)
        if sub is not None:
            yield from _keys(sub, f"{prefix}{name}.")
