"""The `get_current_datetime` tool: the current date and time in any IANA time zone."""

from __future__ import annotations

import functools
import zoneinfo
from datetime import datetime
from typing import Any, Literal

from tools.base import ToolContext, ToolError
from tools.registry import tool

_ALIASES = {"utc": "UTC", "gmt": "UTC", "z": "UTC", "zulu": "UTC"}
_EXAMPLES = "'UTC', 'Europe/London', 'America/New_York', 'Asia/Shanghai', 'Asia/Hong_Kong'"


@functools.cache
def _zone_names_by_lower() -> dict[str, str]:
    # only on the slow path: models often send "europe/london" and the tzdata lookup is exact
    return {name.lower(): name for name in zoneinfo.available_timezones()}


def zone_named(name: str) -> zoneinfo.ZoneInfo:
    key = name.strip()
    key = _ALIASES.get(key.lower()) or key
    try:
        return zoneinfo.ZoneInfo(key)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        canonical = _zone_names_by_lower().get(key.lower())
        if canonical is None:
            hint = f"use an IANA name such as {_EXAMPLES}"
            raise ToolError(f"unknown time zone {name!r}; {hint}") from None
        return zoneinfo.ZoneInfo(canonical)


@tool(read_only=True, open_world=False)
async def get_current_datetime(
    ctx: ToolContext,
    timezone: str | None = None,
    format: Literal["full", "date", "time"] = "full",
) -> dict[str, Any]:
    """Get the current date and time, or just one of them, in a time zone.

    Args:
        timezone: IANA time zone name such as 'Europe/London' or 'Asia/Shanghai';
            the user's default zone when omitted.
        format: 'full' for date, time, weekday and UTC offset; 'date' or 'time' for less.
    """
    zone = zone_named(timezone or ctx.deps.default_timezone)
    now = datetime.now(zone)
    offset = now.strftime("%z")
    fields = {
        "datetime": now.isoformat(timespec="seconds"),
        "date": now.date().isoformat(),
        "time": now.strftime("%H:%M:%S"),
        "weekday": now.strftime("%A"),
        "utc_offset": f"{offset[:3]}:{offset[3:5]}",
    }
    keep = {
        "full": ("datetime", "date", "time", "weekday", "utc_offset"),
        "date": ("date", "weekday"),
        "time": ("time", "utc_offset"),
    }[format]
    return {"timezone": zone.key} | {k: fields[k] for k in keep}
