"""slack_sdk's errors as the channel errors `Delivery` understands.

Slack answers HTTP 200 `{"ok": false, "error": "<code>"}` for a refusal and HTTP 429
`ratelimited` with `Retry-After` for a rate limit; slack_sdk raises `SlackApiError` for both.
Anything else (a timeout, a dropped connection, a proxy's page instead of JSON) means the call's
fate is unknown: a post that may have landed is `DeliveryUncertain`, never sent again. Blocks
Slack refuses (`invalid_blocks`) leave a post's or update's text to go alone (`blocks_or_text`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError

from adapters.base import ChannelError, DeliveryUncertain, MessageGone

log = logging.getLogger(__name__)

REVOKED = frozenset(
    {"invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive"}
)
GONE = frozenset({"message_not_found", "cant_update_message", "edit_window_closed", "is_inactive"})
BAD_BLOCKS = frozenset({"invalid_blocks", "invalid_blocks_format"})


def error_code(exc: SlackApiError) -> str | None:
    """Slack's error code; None when the answer was not Slack's JSON."""
    data = getattr(exc.response, "data", None)
    if not isinstance(data, dict) or "ok" not in data:
        return None
    return str(data.get("error", "unknown"))


def is_rate_limit(exc: SlackApiError, code: str) -> bool:
    return getattr(exc.response, "status_code", 0) == 429 or code == "ratelimited"


def retry_after(exc: SlackApiError) -> float:
    headers = {k.lower(): v for k, v in (getattr(exc.response, "headers", None) or {}).items()}
    value = headers.get("retry-after")
    if isinstance(value, list):
        value = value[0] if value else None
    try:
        return max(float(value), 0.5) if value is not None else 1.0
    except ValueError:
        return 1.0


def refused(method: str, code: str) -> ChannelError:
    """A refusal other than a rate limit or a revoked token."""
    if code in GONE and method == "chat.update":
        return MessageGone(f"Slack cannot update that message ({code})")
    if code == "msg_too_long":
        return ChannelError(f"Slack refused the text of {method} as too long")
    return ChannelError(f"Slack refused {method}: {code}")


def lost(method: str, exc: BaseException, sending: bool) -> ChannelError:
    """No usable answer. Only a connection never made proves a post did not land."""
    detail = (
        "not Slack's JSON" if isinstance(exc, SlackApiError) else f"{type(exc).__name__}: {exc}"
    )
    what = f"no usable answer from Slack to {method} ({detail})"
    if sending and not isinstance(exc, aiohttp.ClientConnectorError):
        return DeliveryUncertain(f"{what}; the message may have been posted, so it is not resent")
    return ChannelError(what)


async def blocks_or_text(call: Callable[..., Awaitable[Any]], args: dict[str, Any]) -> Any:
    """The call; if Slack refuses its blocks (a tool's hint past a Block Kit limit), the text
    alone: the answer must land even when its buttons cannot."""
    try:
        return await call(**args)
    except SlackApiError as exc:
        if "blocks" not in args or error_code(exc) not in BAD_BLOCKS:
            raise
        log.warning("Slack refused the blocks (%s); the text goes alone", error_code(exc))
        # chat.update keeps a message's blocks unless told otherwise: an empty list removes them
        text_only = {k: v for k, v in args.items() if k != "blocks"}
        if "ts" in args:
            text_only["blocks"] = []
        return await call(**text_only)
