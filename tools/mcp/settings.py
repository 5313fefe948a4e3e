"""The `mcp:` section of config.yaml: the tool servers, each over stdio or Streamable HTTP.

It lives beside the MCP source (as tools/settings.py does for the built-ins), so `tools` needs
nothing from `bot`; the config loader mounts it. Every mistake names the server, the key and the
fix (the loader prefixes `mcp.servers.<name>`).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# the server name is part of every tool name (`mcp__<server>__<tool>`): keep it to what both
# vendors accept in a tool name, and free of the separator
SERVER_NAME = re.compile(r"^[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*$")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)


class McpOAuthConfig(_Section):
    """The client-credentials grant: the gateway's own identity at the server's authorization
    server (`issuer`, so the secret is only ever sent there)."""

    client_id: str
    client_secret: str = Field(repr=False)  # `${MCP_TICKETS_SECRET}`, from the environment
    issuer: str
    scope: str | None = None

    @field_validator("client_id", "client_secret")
    @classmethod
    def _given(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("is empty; set it (the secret from the environment: ${MY_SECRET})")
        return value

    @field_validator("issuer")
    @classmethod
    def _issuer(cls, value: str) -> str:
        if not re.match(r"^https?://[^/\s]+", value):
            raise ValueError(
                "expected the authorization server's http(s) issuer URL, e.g."
                " https://auth.example.com"
            )
        return value


class McpServerConfig(_Section):
    """One server: `command` (+ `args`, `env`, `cwd`) starts it as a child over stdio; `url`
    (+ `headers`) reaches it over Streamable HTTP. Exactly one of `command` and `url`."""

    command: str | None = None
    args: list[str] = []
    # the child's whole environment (plus PATH, unless given here): the gateway's own, with its
    # secrets, never reaches it; write `TOKEN: ${GITHUB_TOKEN}` to pass one on
    env: dict[str, str] = Field({}, repr=False)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field({}, repr=False)  # `Authorization: Bearer ${TOKEN}`
    oauth: McpOAuthConfig | None = None  # client credentials, for `url` servers
    sse: bool = False  # true: `url` speaks only the legacy HTTP+SSE transport (often `.../sse`)
    call_timeout_s: float = Field(30, gt=0, le=3600)
    connect_timeout_s: float = Field(10, gt=0, le=600)
    include: list[str] = ["*"]  # globs over the server's own tool names
    exclude: list[str] = []
    enabled: bool = True
    required: bool = False  # true: /readyz fails while this server is down

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not re.match(r"^https?://[^/\s]+", value):
            raise ValueError(
                "expected an http:// or https:// URL such as http://127.0.0.1:8000/mcp"
            )
        return value

    @field_validator("command")
    @classmethod
    def _command(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("command is empty; name the program, e.g. command: npx")
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if self.command is not None and self.url is not None:
            raise ValueError("set `command` (stdio) or `url` (Streamable HTTP), not both")
        if self.command is None and self.url is None:
            raise ValueError(
                "set `command` (a server started over stdio, e.g. command: npx, args: [-y,"
                " '@modelcontextprotocol/server-filesystem', /srv/files]) or `url` (Streamable"
                " HTTP, e.g. url: http://127.0.0.1:8000/mcp)"
            )
        if self.url is not None and (self.args or self.env or self.cwd):
            raise ValueError("args, env and cwd are for `command` servers; remove them for `url`")
        if self.command is not None and (self.headers or self.sse or self.oauth):
            raise ValueError(
                "headers, oauth and sse are for `url` servers; remove them for `command`"
            )
        return self

    @property
    def transport(self) -> str:
        if self.command is not None:
            return "stdio"
        return "sse" if self.sse else "http"


class McpSettings(_Section):
    servers: dict[str, McpServerConfig] = {}

    @field_validator("servers", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        if isinstance(value, dict):
            for name in value:
                if not isinstance(name, str) or not SERVER_NAME.match(name) or len(name) > 32:
                    raise ValueError(
                        f"server name {name!r}: use letters, digits, '-' and single '_'"
                        " (at most 32 characters), e.g. files or github-issues"
                    )
        return value

    def enabled(self) -> dict[str, McpServerConfig]:
        return {name: server for name, server in self.servers.items() if server.enabled}
