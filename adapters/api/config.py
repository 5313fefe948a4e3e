"""`channels.api`: the sessions API's config section (pydantic only: cheap to import)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from adapters.access import AccessConfig
from adapters.registry import ChannelSpec

_KEY_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


class ApiKeyConfig(BaseModel):
    """One API key: a name that owns its sessions, and the SHA-256 of the key (never the key)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    sha256: str

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if not _KEY_ID.fullmatch(value):
            raise ValueError("expected 1-64 of A-Z a-z 0-9 _ . - (it names the key's owner)")
        return value

    @field_validator("sha256")
    @classmethod
    def _check_hash(cls, value: str) -> str:
        if not _SHA256_HEX.fullmatch(value):
            raise ValueError(
                "expected the key's SHA-256 as 64 lowercase hex characters, not the key itself; "
                "`bot api-key new` makes a key and prints its hash"
            )
        return value


class ApiConfig(AccessConfig):
    enabled: bool = False
    keys: list[ApiKeyConfig] = []
    rate_limit_per_minute: int = Field(30, ge=1)
    max_text_chars: int = Field(8000, ge=1)
    stream_timeout_s: float = Field(300, gt=0)
    keepalive_s: float = Field(15, gt=0)
    max_streams_per_key: int = Field(20, ge=1)
    max_streams: int = Field(200, ge=1)
    replay_events: int = Field(200, ge=0)

    @field_validator("keys")
    @classmethod
    def _unique(cls, keys: list[ApiKeyConfig]) -> list[ApiKeyConfig]:
        ids = [key.id for key in keys]
        hashes = [key.sha256 for key in keys]
        if len(set(ids)) != len(ids) or len(set(hashes)) != len(hashes):
            raise ValueError("every key needs its own id and its own sha256")
        return keys

    @model_validator(mode="after")
    def _keys_when_enabled(self) -> ApiConfig:
        if self.enabled and not self.keys:
            raise ValueError(
                "channels.api is enabled without keys: add one to channels.api.keys "
                "(`bot api-key new --id NAME` prints a key and its entry)"
            )
        return self


SPEC = ChannelSpec("api", "adapters.api.factory:build")
