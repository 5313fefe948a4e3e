"""The names the model sees for a server's tools: `mcp__<server>__<tool>`, sanitised.

Both vendors take `^[a-zA-Z0-9_-]{1,64}$`. A tool name with other characters gets them replaced by
`_`; a name past 64 characters is cut and ends in 8 hex digits of the full name's SHA-1, so two
long names that share a start stay distinct and the same tool keeps its name across reconnects.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from collections.abc import Sequence

PREFIX = "mcp__"
MAX_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str, *, hashed: bool = False) -> str:
    """The name of tool `tool` of server `server` as the model calls it; `hashed`: with the
    hash suffix even when short (two tools whose names sanitise alike)."""
    full = f"{PREFIX}{server}__{_UNSAFE.sub('_', tool) or '_'}"
    if len(full) <= MAX_NAME and not hashed:
        return full
    digest = hashlib.sha1(f"{server}/{tool}".encode()).hexdigest()[:8]
    return f"{full[: MAX_NAME - 9]}_{digest}"


def server_prefix(server: str) -> str:
    return f"{PREFIX}{server}__"


def is_mcp_name(name: str) -> bool:
    return name.startswith(PREFIX)


def selected(tool: str, include: Sequence[str], exclude: Sequence[str]) -> bool:
    """Whether a server's tool (its own name) passes the server's include and exclude globs."""
    return any(fnmatch.fnmatchcase(tool, p) for p in include) and not any(
        fnmatch.fnmatchcase(tool, p) for p in exclude
    )
