"""One server's tool list as the registry sees it: names, specs, annotations, the version.

Listing follows `next_cursor` (the SDK's `list_tools` returns one page), keeps the tools the
server's `include`/`exclude` globs select, names them `mcp__<server>__<tool>` (tools/mcp/names.py),
normalises their schemas (tools/mcp/schema.py) and carries MCP's annotations into
`ToolAnnotations`. The version rises only when the list really changed, so a reconnect to a
restarted server that lists the same tools costs no rebuild of any prompt.
"""

from __future__ import annotations

import logging

import mcp.types as types
from mcp import Client

from tools.base import ToolSpec
from tools.mcp.names import selected, tool_name
from tools.mcp.schema import cut_description, normalise
from tools.mcp.settings import McpServerConfig
from tools.source import ToolAnnotations, ToolInfo

log = logging.getLogger(__name__)

MAX_PAGES = 100  # a server whose cursors never end cannot hang the listing


def annotations_of(tool: types.Tool) -> ToolAnnotations:
    """MCP's hints, with MCP's defaults for what the server leaves out."""
    hints = tool.annotations
    if hints is None:
        return ToolAnnotations()
    read_only = bool(hints.read_only_hint)
    return ToolAnnotations(
        read_only=read_only,
        destructive=False if read_only else hints.destructive_hint is not False,
        idempotent=bool(hints.idempotent_hint),
        open_world=hints.open_world_hint is not False,
    )


def marked_destructive(tool: types.Tool) -> bool:
    """Whether the server says in so many words that the tool may destroy (`destructiveHint`
    true, not read-only): such a call waits for a person's yes. A tool with no hints is not
    asked about (MCP's default would ask before every call of every unannotated tool: the
    "too many prompts" users of other gateways complain of)."""
    hints = tool.annotations
    return hints is not None and hints.destructive_hint is True and not hints.read_only_hint


class Catalog:
    """The tools of one server, as last listed."""

    def __init__(self, server: str, config: McpServerConfig) -> None:
        self._server = server
        self._config = config
        self.infos: tuple[ToolInfo, ...] = ()
        self.version = 0
        self._original: dict[str, str] = {}  # our name -> the server's

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(info.name for info in self.infos)

    def original(self, name: str) -> str | None:
        """The server's own name of tool `name`; None if it is not listed (any more)."""
        return self._original.get(name)

    async def refresh(self, client: Client) -> None:
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        self.publish(tools)

    def publish(self, tools: list[types.Tool]) -> None:
        config = self._config
        infos: list[ToolInfo] = []
        original: dict[str, str] = {}
        for tool in tools:
            if not selected(tool.name, config.include, config.exclude):
                continue
            name = tool_name(self._server, tool.name)
            if name in original:  # two names that sanitise alike: the second one hashed
                name = tool_name(self._server, tool.name, hashed=True)
            if name in original:
                log.warning(
                    "MCP server %s lists tool %r twice; the second is ignored",
                    self._server,
                    tool.name,
                )
                continue
            original[name] = tool.name
            description = cut_description(tool.description or tool.title or "") or (
                f"Tool {tool.name} of the {self._server} MCP server."
            )
            spec = ToolSpec(name, description, normalise(tool.input_schema))
            infos.append(
                ToolInfo(
                    spec,
                    annotations_of(tool),
                    status=f"Using {tool.title or tool.name} ({self._server})",
                    timeout_s=config.call_timeout_s,
                    approval=marked_destructive(tool),
                )
            )
        if tuple(infos) != self.infos:
            self.infos = tuple(infos)
            self._original = original
            self.version += 1
