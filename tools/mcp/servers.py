"""`McpServers`: every enabled `mcp.servers.<name>`, each a tool source with its supervisor task.

The app adds `sources` to its tool registry and runs `run()` in its task group: the gateway
starts and answers at once, whatever the servers do; each server connects, fails, retries on
its own. `states()` is what `/readyz`, `bot mcp list` and the admin view show.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tools.mcp.settings import McpSettings
from tools.mcp.state import ServerState

if TYPE_CHECKING:
    from tools.mcp.server import McpServer


class McpServers:
    def __init__(
        self,
        settings: McpSettings,
        *,
        base_dir: Path | None = None,
        backoff_s: tuple[float, float] = (0.5, 30.0),
    ) -> None:
        """`base_dir`: where a relative `cwd` starts (the config file's folder)."""
        self.servers: dict[str, McpServer] = {}
        enabled = settings.enabled()
        if enabled:  # the MCP SDK takes most of a second to import: only when a server is on
            from tools.mcp.server import McpServer
        for name, config in enabled.items():
            if config.cwd is not None and base_dir is not None:
                config = config.model_copy(update={"cwd": str(base_dir / config.cwd)})
            self.servers[name] = McpServer(name, config, backoff_s=backoff_s)

    @property
    def sources(self) -> Sequence[McpServer]:
        return tuple(self.servers.values())

    def states(self) -> Mapping[str, ServerState]:
        return {name: server.state for name, server in self.servers.items()}

    async def run(self) -> None:
        """Supervise every server until cancelled (then every connection closes, children too)."""
        if not self.servers:
            return
        async with asyncio.TaskGroup() as group:
            for name, server in self.servers.items():
                group.create_task(server.run(), name=f"mcp:{name}")

    async def settle(self, timeout_s: float) -> None:
        """Until every server has connected or failed once, at most `timeout_s` (`bot mcp`)."""
        waits = [s.wait_for(lambda st: st.phase != "connecting") for s in self.servers.values()]
        if waits:
            async with asyncio.timeout(timeout_s):
                await asyncio.gather(*waits)
