"""config.yaml: pydantic models, `${VAR}` expansion from the environment, one-line errors."""

from adapters.telegram.config import TelegramConfig
from adapters.websocket.config import WebsocketConfig
from bot.runtime.config.env import expand_env
from bot.runtime.config.errors import ConfigError
from bot.runtime.config.loader import DEFAULT_PATH, config_folder, load_config
from bot.runtime.config.schema import (
    AgentConfig,
    ChannelsConfig,
    Config,
    FallbackProvider,
    GatewayConfig,
    LLMConfig,
    LogConfig,
    PersonasConfig,
    RedisConfig,
    ServerConfig,
    StorageConfig,
    config_keys,
)

__all__ = [
    "DEFAULT_PATH",
    "AgentConfig",
    "ChannelsConfig",
    "Config",
    "ConfigError",
    "FallbackProvider",
    "GatewayConfig",
    "LLMConfig",
    "LogConfig",
    "PersonasConfig",
    "RedisConfig",
    "ServerConfig",
    "StorageConfig",
    "TelegramConfig",
    "WebsocketConfig",
    "config_folder",
    "config_keys",
    "expand_env",
    "load_config",
]
