"""The config every channel section extends: who may talk to the bot, and how a secret is declared."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


def secret(default: str | None = "", env: str | None = None) -> Any:
    """A secret, kept out of repr; `env` names the variable it comes from when the key is absent.

    The config loader reads these two markers (`secret`, `env`) from the field's schema extra.
    """
    extra: dict[str, Any] = {"secret": True} | ({"env": env} if env else {})
    return Field(default, repr=False, json_schema_extra=extra)


class AccessConfig(BaseModel):
    """The access keys every channel section takes; ids are platform ids, written as text."""

    # Numbers become strings so an unquoted numeric user or chat id still loads as text.
    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)

    allowed_users: list[str] = []
    allowed_chats: list[str] = []
    group_reply: Literal["mention", "all"] | None = None  # None: gateway.group_reply


def url_path(value: str) -> str:
    """A field validator: a route on our web server."""
    if not value.startswith("/"):
        raise ValueError("expected a URL path starting with '/'")
    return value
