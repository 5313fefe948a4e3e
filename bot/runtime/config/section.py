"""The base of every config section model."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    # Numbers become strings so an unquoted numeric chat id or password still loads as text.
    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)
