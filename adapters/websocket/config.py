"""`channels.websocket`: the web socket channel's config section (pydantic only: cheap to import)."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, field_validator

from adapters.access import AccessConfig, secret, url_path
from adapters.registry import ChannelSpec


def _origin(value: str) -> str:
    """An `Origin` as browsers send it, since the channel compares them exactly."""
    parts = urlsplit(value)
    if value.endswith("/") and parts.scheme and parts.netloc and parts.path == "/":
        raise ValueError(f"expected no trailing '/'; browsers send {value.rstrip('/')!r}")
    try:
        port_ok = parts.port != 0
    except ValueError:  # not a number, or out of range
        port_ok = False
    extra = parts.path or parts.query or parts.fragment or value.endswith(("?", "#"))
    if not (parts.scheme and parts.hostname and port_ok) or "@" in parts.netloc or extra:
        raise ValueError("expected an origin: scheme://host[:port], no path, e.g. 'https://a.com'")
    if value != value.lower():
        raise ValueError(f"expected lower case, as browsers send it: {value.lower()!r}")
    return value


class WebsocketConfig(AccessConfig):
    enabled: bool = True
    path: str = "/ws"
    allowed_origins: list[Annotated[str, AfterValidator(_origin)]] = [
        "http://127.0.0.1:8080",
        "http://localhost:8080",
    ]
    identity_secret: str | None = secret(None)
    max_frame_bytes: int = Field(65536, ge=1)
    heartbeat_s: float = Field(20, gt=0)
    rate_limit_per_minute: int = Field(30, ge=1)
    max_text_chars: int = Field(8000, ge=1)
    hello_timeout_s: float = Field(10, gt=0)
    max_connections: int | None = Field(None, ge=1)  # None: 3/4 of the open-file limit
    max_connections_per_address: int = Field(64, ge=1)
    # behind your own reverse proxy: the header it sets to the client's address (X-Real-IP)
    client_address_header: str | None = None
    # frames kept per conversation for replay; older ones come from the store (the transcript)
    replay_events: int = Field(200, ge=0)

    _check_path = field_validator("path")(url_path)


SPEC = ChannelSpec("websocket", "adapters.websocket.factory:build")
