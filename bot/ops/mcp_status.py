"""The MCP servers on `/readyz`: each one's state, fatal only for a server marked `required`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from bot.ops.readiness import Check, Down, Readiness

if TYPE_CHECKING:  # the MCP SDK is imported only when a server is enabled (tools/mcp/servers.py)
    from tools.mcp.server import McpServer
    from tools.mcp.servers import McpServers


def _check(server: McpServer) -> Check:
    async def check() -> Down | None:
        state = server.state
        if state.ready:
            return None
        reason = f"{state.phase}: {state.reason}" if state.reason else state.phase
        return Down(reason, datetime.fromtimestamp(state.since, UTC))

    return check


def watch_mcp(readiness: Readiness, servers: McpServers) -> None:
    """One check per server, `mcp:<name>`; a down optional server is listed as degraded."""
    for name, server in servers.servers.items():
        readiness.add(f"mcp:{name}", _check(server), required=server.config.required)
