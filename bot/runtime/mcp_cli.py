"""`bot mcp list` and `bot mcp check [NAME]`: connect to the configured servers, say how each is.

Run from the command line, these connect from this process (a running gateway's view is on its
`/readyz` and admin page): each enabled server gets `connect_timeout_s` to answer; `list` prints
every server's state and tools, `check` exits 1 when a checked server is down, with the reason.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from pathlib import Path

from bot.runtime.config import Config, ConfigError
from tools.mcp.servers import McpServers
from tools.mcp.settings import McpSettings


async def mcp_command(config: Config, base_dir: Path, args: argparse.Namespace) -> int:
    settings = config.mcp
    name = getattr(args, "name", None)
    if name is not None:
        if name not in settings.servers:
            known = sorted(settings.servers)
            raise ConfigError(f"mcp.servers: no server {name!r}; configured: {known}")
        if not settings.servers[name].enabled:
            print(f"{name}: disabled (enabled: false)")
            return 1
        settings = McpSettings(servers={name: settings.servers[name]})
    servers = McpServers(settings, base_dir=base_dir)
    if not servers.servers:
        print("no MCP servers are enabled (mcp.servers in config.yaml)")
        return 0
    deadline = max(s.config.connect_timeout_s for s in servers.sources) + 1
    runner = asyncio.create_task(servers.run())
    try:
        with contextlib.suppress(TimeoutError):
            await servers.settle(deadline)
        states = dict(servers.states())  # before the connections close
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
    down = 0
    for state in states.values():
        print(state.line())
        if args.mcp_command == "list":
            for tool in state.tools:
                print(f"  {tool}")
        down += not state.ready
    return 1 if down and args.mcp_command == "check" else 0
