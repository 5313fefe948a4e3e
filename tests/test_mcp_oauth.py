"""OAuth client credentials: the config's checks, and the real SDK provider against a protected
demo server (a child) and a small authorization server on loopback that records every token
request."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import unquote

import pytest
from aiohttp import web

from bot.runtime.config import load_config
from tests.test_config import error_of, write
from tests.test_mcp_servers import CTX, free_port, http_server, running, until
from tools.mcp.server import McpServer
from tools.mcp.settings import McpOAuthConfig, McpServerConfig

TOKEN = "tok-4f1c"  # what the authorization server issues and the demo server accepts


@asynccontextmanager
async def authorization_server(secret: str, seen: list[dict[str, str]]) -> AsyncIterator[str]:
    """RFC 8414 metadata and a token endpoint taking client_secret_basic for `gateway`."""
    port = free_port()
    issuer = f"http://127.0.0.1:{port}"

    async def metadata(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "issuer": issuer,
                "authorization_endpoint": f"{issuer}/authorize",
                "token_endpoint": f"{issuer}/token",
                "grant_types_supported": ["client_credentials"],
                "response_types_supported": ["code"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic"],
            }
        )

    async def token(request: web.Request) -> web.Response:
        form = {k: str(v) for k, v in (await request.post()).items()}
        scheme, _, encoded = request.headers.get("Authorization", "").partition(" ")
        client_id, _, client_secret = base64.b64decode(encoded).decode().partition(":")
        seen.append({**form, "client_id": unquote(client_id), "scheme": scheme})
        if (unquote(client_id), unquote(client_secret)) != ("gateway", secret):
            return web.json_response({"error": "invalid_client"}, status=401)
        return web.json_response(
            {"access_token": TOKEN, "token_type": "Bearer", "expires_in": 3600}
        )

    app = web.Application()
    app.router.add_get("/.well-known/oauth-authorization-server", metadata)
    app.router.add_post("/token", token)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield issuer
    finally:
        await runner.cleanup()


def oauth_server(port: int, issuer: str, secret: str, **oauth: str) -> McpServerConfig:
    return McpServerConfig(
        url=f"http://127.0.0.1:{port}/mcp",
        oauth=McpOAuthConfig(client_id="gateway", client_secret=secret, issuer=issuer, **oauth),
    )


@pytest.mark.process
async def test_client_credentials_get_a_token_and_the_tools_work(tmp_path: Path) -> None:
    seen: list[dict[str, str]] = []
    port = free_port()
    async with authorization_server("s3cret", seen) as issuer:
        protected = ("--oauth-issuer", issuer, "--oauth-token", TOKEN)
        config = oauth_server(port, issuer, "s3cret", scope="tools")
        async with (
            http_server(port, tmp_path / "log", "--http", *protected),
            running(McpServer("tickets", config)) as source,
        ):
            await until(source, "ready")
            assert "mcp__tickets__add" in [info.name for info in source.tools()]
            assert (await source.call("mcp__tickets__add", {"a": 2, "b": 3}, CTX)).text == "5"
    # one token, asked for once, with the configured scope and this server as the resource
    assert seen == [
        {
            "grant_type": "client_credentials",
            "resource": f"http://127.0.0.1:{port}/mcp",
            "scope": "tools",
            "client_id": "gateway",
            "scheme": "Basic",
        }
    ]


@pytest.mark.process
async def test_a_wrong_secret_leaves_the_server_down_with_the_reason(tmp_path: Path) -> None:
    seen: list[dict[str, str]] = []
    port = free_port()
    async with authorization_server("s3cret", seen) as issuer:
        protected = ("--oauth-issuer", issuer, "--oauth-token", TOKEN)
        config = oauth_server(port, issuer, "wrong")
        async with (
            http_server(port, tmp_path / "log", "--http", *protected),
            running(McpServer("tickets", config)) as source,
        ):
            await until(source, "down")
            reason = source.state.reason
    assert "Token exchange failed (401)" in reason and "invalid_client" in reason
    assert "wrong" not in reason  # the secret never shows
    assert seen and seen[0]["client_id"] == "gateway"


OAUTH_YAML = """
mcp:
  servers:
    tickets:
      %s
      oauth: {%s}
"""
GOOD = "client_id: gw, client_secret: '${TICKETS_SECRET}', issuer: 'https://auth.example.com'"


def test_the_secret_comes_from_the_environment_and_never_shows(tmp_path: Path) -> None:
    text = OAUTH_YAML % ("url: https://mcp.example.com/mcp", GOOD + ", scope: tickets.read")
    config = load_config(write(tmp_path, text), env={"TICKETS_SECRET": "hush-123"})
    oauth = config.mcp.servers["tickets"].oauth
    assert oauth is not None and oauth.client_secret == "hush-123" and oauth.scope == "tickets.read"
    assert "hush-123" not in repr(config)


@pytest.mark.parametrize(
    ("transport", "oauth", "expected"),
    [
        (
            "url: https://mcp.example.com/mcp",
            "client_id: gw, issuer: 'https://a.example.com'",
            "client_secret",
        ),
        (
            "url: https://mcp.example.com/mcp",
            "client_secret: x, issuer: 'https://a.example.com'",
            "client_id",
        ),
        (
            "url: https://mcp.example.com/mcp",
            "client_id: gw, client_secret: '', issuer: 'https://a.example.com'",
            "is empty",
        ),
        (
            "url: https://mcp.example.com/mcp",
            "client_id: gw, client_secret: x, issuer: auth.example.com",
            "issuer URL",
        ),
        ("url: https://mcp.example.com/mcp", "client_id: gw, client_secret: x", "issuer"),
        ("command: npx", GOOD, "headers, oauth and sse are for `url` servers"),
    ],
)
def test_a_wrong_oauth_block_says_what_to_fix(
    tmp_path: Path, transport: str, oauth: str, expected: str
) -> None:
    message = error_of(tmp_path, OAUTH_YAML % (transport, oauth), {"TICKETS_SECRET": "hush"})
    assert "mcp.servers.tickets" in message and expected in message
    assert "hush" not in message
