"""The config every channel section extends: who may talk to the bot, and how a secret is declared."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

_INSTANCE_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")


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
    # direct messages from users not allowlisted: refused (allowlist; empty lists admit
    # everyone), given a pairing code an admin approves (pairing), or admitted (open)
    dm_policy: Literal["allowlist", "pairing", "open"] = "allowlist"
    persona: str | None = None  # who answers on this instance; None: the coordinator (default)

    def credential(self) -> str | None:
        """What identifies the account on its platform (a bot token, an app id); two instances
        with the same one would fight over its events. None: nothing to compare."""
        return None

    def routes(self) -> tuple[str, ...]:
        """The web paths this section serves when enabled (webhooks): distinct per instance."""
        return ()


class InstanceConfig(AccessConfig):
    """A section of a kind that may run several accounts (`channels.telegram` as a list)."""

    # The instance's name: it starts the conversation keys and event ids of its chats. The
    # loader sets it to the kind's name for a single mapping (bot/runtime/config/instances.py).
    id: str | None = None

    @field_validator("id")
    @classmethod
    def _instance_id(cls, value: str | None) -> str | None:
        if value is not None and not _INSTANCE_ID.fullmatch(value):
            raise ValueError(
                "expected 1-32 characters of a-z, 0-9, _ and -, starting with a letter or digit"
            )
        return value


def url_path(value: str) -> str:
    """A field validator: a route on our web server."""
    if not value.startswith("/"):
        raise ValueError("expected a URL path starting with '/'")
    return value
