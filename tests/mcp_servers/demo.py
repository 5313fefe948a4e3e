"""A small MCP server for the tests: `python demo.py [--http PORT | --sse PORT] [--log FILE]`.

Over stdio by default, Streamable HTTP on 127.0.0.1:PORT with `--http` (at /mcp), the legacy
HTTP+SSE transport with `--sse` (at /sse). `--oauth-issuer URL --oauth-token T` lets only
`Bearer T` in (401 and the protected-resource metadata otherwise). `--log FILE` appends one
line per event the tests look for (`started <pid>`, `cancelled <tool>`, `env <json>`).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import sys

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.types import ImageContent, TextContent, ToolAnnotations

PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
    )
).decode()


class OneToken:
    """Accepts the one token the test's authorization server hands out."""

    def __init__(self, token: str) -> None:
        self.token = token

    async def verify_token(self, token: str) -> AccessToken | None:
        if token != self.token:
            return None
        return AccessToken(token=token, client_id="gateway", scopes=["tools"])


def build(log: str | None, issuer: str | None = None, token: str = "", port: int = 0) -> MCPServer:
    if issuer is None:
        server = MCPServer("demo")
    else:  # a protected resource: 401 + WWW-Authenticate without the token, as the spec says
        # from strings: the settings keep a path-less issuer without a trailing slash
        auth = AuthSettings.model_validate(
            {
                "issuer_url": issuer,
                "resource_server_url": f"http://127.0.0.1:{port}/mcp",
                "required_scopes": ["tools"],
                "validate_token_resource": False,
            }
        )
        server = MCPServer("demo", token_verifier=OneToken(token), auth=auth)

    def note(line: str) -> None:
        if log:
            with open(log, "a") as f:
                f.write(line + "\n")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def add(a: int, b: int) -> int:
        """Add two whole numbers."""
        return a + b

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def delete_file(path: str) -> str:
        """Delete a file (pretends to)."""
        return f"deleted {path}"

    @server.tool()
    async def slow(seconds: float) -> str:
        """Wait, then answer; says so in the log when cancelled."""
        note(f"slow started {os.getpid()}")
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            note("cancelled slow")
            raise
        return "done"

    @server.tool()
    def whoami() -> str:
        """The server's pid and environment."""
        return json.dumps({"pid": os.getpid(), "env": dict(os.environ)})

    @server.tool()
    def picture() -> list[TextContent | ImageContent]:
        """A one-pixel PNG."""
        return [
            TextContent(type="text", text="a pixel"),
            ImageContent(type="image", data=PNG, mime_type="image/png"),
        ]

    @server.tool()
    def fail() -> str:
        """Always fails."""
        raise ValueError("the disk is on fire")

    note(f"started {os.getpid()}")
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int)
    parser.add_argument("--sse", type=int)  # the legacy HTTP+SSE transport on this port
    parser.add_argument("--log")
    # with --http: only a bearer token from this authorization server (issuer URL) is let in
    parser.add_argument("--oauth-issuer")
    parser.add_argument("--oauth-token", default="")
    # a grandchild, as `npx` leaves a `node`: it outlives the server unless the group is ended
    parser.add_argument("--child", action="store_true")
    args = parser.parse_args()
    server = build(args.log, args.oauth_issuer, args.oauth_token, args.http or 0)
    if args.child:
        import subprocess

        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        if args.log:
            with open(args.log, "a") as f:
                f.write(f"child {child.pid}\n")
    if args.sse is not None:
        server.settings.log_level = "WARNING"
        server.run("sse", host="127.0.0.1", port=args.sse)
    elif args.http is None:
        server.run("stdio")
    else:
        server.settings.log_level = "WARNING"
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    sys.exit(0)


if __name__ == "__main__":
    main()
