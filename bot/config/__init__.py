"""config.yaml: pydantic models, `${VAR}` expansion from the environment, one-line errors."""

from bot.config.env import expand_env
from bot.config.errors import ConfigError
from bot.config.loader import DEFAULT_PATH, load_config
from bot.config.schema import (
    AgentConfig,
    ChannelsConfig,
    Config,
    FallbackProvider,
    FeishuConfig,
    GatewayConfig,
    LLMConfig,
    LogConfig,
    PersonasConfig,
    RedisConfig,
    ServerConfig,
    SlackConfig,
    StorageConfig,
    TelegramConfig,
    WebsocketConfig,
    config_keys,
)

__all__ = [
    "DEFAULT_PATH",
    "AgentConfig",
    "ChannelsConfig",
    "Config",
    "ConfigError",
    "FallbackProvider",
    "FeishuConfig",
    "GatewayConfig",
    "LLMConfig",
    "LogConfig",
    "PersonasConfig",
    "RedisConfig",
    "ServerConfig",
    "SlackConfig",
    "StorageConfig",
    "TelegramConfig",
    "WebsocketConfig",
    "config_keys",
    "expand_env",
    "load_config",
]
