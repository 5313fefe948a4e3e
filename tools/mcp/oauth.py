"""OAuth client credentials for a remote server: the SDK's own provider, tokens kept in memory.

The provider is an httpx2 `Auth`: on a 401 it discovers the server's protected-resource and
authorization-server metadata, asks the token endpoint for a token and retries; it refreshes or
asks again when the token expires. Tokens live as long as the server's HTTP client (one
connection), so nothing secret is written anywhere.
"""

from __future__ import annotations

import httpx2
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from tools.mcp.settings import McpOAuthConfig


class MemoryTokenStorage:
    """The SDK's `TokenStorage`, in memory."""

    def __init__(self) -> None:
        self._tokens: OAuthToken | None = None
        self._client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self._tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self._client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._client = client_info


class _ConfiguredScope(ClientCredentialsOAuthProvider):
    """Asks for the configured `scope` when one is set: the SDK otherwise replaces it with what
    the server's 401 or metadata advertises (the MCP spec's choice for interactive clients),
    while an admin who names a scope means exactly that one."""

    def __init__(self, server_url: str, oauth: McpOAuthConfig) -> None:
        super().__init__(
            server_url,
            MemoryTokenStorage(),
            client_id=oauth.client_id,
            client_secret=oauth.client_secret,
            scope=oauth.scope,
            issuer=oauth.issuer,
        )
        self._scope = oauth.scope

    async def _perform_authorization(self) -> httpx2.Request:
        if self._scope is not None:
            self.context.client_metadata.scope = self._scope
        return await super()._perform_authorization()


def client_credentials(server_url: str, oauth: McpOAuthConfig) -> ClientCredentialsOAuthProvider:
    """The `auth=` for the server's HTTP client."""
    return _ConfiguredScope(server_url, oauth)
