"""Where the server listens: `--host/--port` and BOT_HOST/BOT_PORT over the file, origins to match.

A second instance, or a busy 8080, needs no config file: `bot serve --port 8081`. The web socket's
default allowed origins name the default port, so when they are left at the default they follow
the port actually configured (the reference config.yaml spells the defaults out: equal to the
default list counts as the default).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adapters.websocket.config import WebsocketConfig
from bot.runtime.config.errors import ConfigError
from bot.runtime.config.schema import Config

DEFAULT_ORIGINS: list[str] = list(WebsocketConfig.model_fields["allowed_origins"].default)
LOCAL_HOSTS = {"127.0.0.1", "localhost", "0.0.0.0", "::", "::1", ""}


def override_server(
    data: dict[Any, Any], env: Mapping[str, str], host: str | None, port: int | None
) -> None:
    """Put the host and port into the config data: arguments win, then BOT_HOST/BOT_PORT."""
    server = data.get("server")
    if not isinstance(server, dict):
        return  # a wrong type is reported by validation, under its own key
    if host is None:
        host = env.get("BOT_HOST") or None
    if port is None and env.get("BOT_PORT"):
        port = _port(env["BOT_PORT"], "BOT_PORT")
    if host is not None:
        server["host"] = host
    if port is not None:
        server["port"] = port


def _port(text: str, where: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise ConfigError(
            f"{where}: expected a port number 0..65535 (0: any free port), got {text!r}"
        )
    return port


def follow_server(config: Config) -> Config:
    """`config` with the web socket's default allowed origins moved to the configured host:port."""
    websocket = config.channels.websocket
    origins = origins_for(config.server.host, config.server.port)
    if websocket.allowed_origins != DEFAULT_ORIGINS or not origins:
        return config
    channels = config.channels.model_copy(
        update={"websocket": websocket.model_copy(update={"allowed_origins": origins})}
    )
    return config.model_copy(update={"channels": channels})


def origins_for(host: str, port: int) -> list[str]:
    """The `Origin` a browser sends from a page served at host:port; none for port 0.

    Port 0 is chosen when the server binds, too late for the config; the channel's same-origin
    rule admits the demo page there anyway.
    """
    if port == 0:
        return []
    at = "" if port == 80 else f":{port}"
    if host.lower() in LOCAL_HOSTS:
        return [f"http://127.0.0.1{at}", f"http://localhost{at}"]
    name = f"[{host}]" if ":" in host else host
    return [f"http://{name.lower()}{at}"]
