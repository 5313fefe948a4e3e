"""`llm.choices`: the models an admin lets a conversation switch to (`/model`), and the checks
that tie them to the rest of the config (a quota's `soft_model`, a channel instance's id).

A choice is one provider like `llm.fallback`'s entries (provider, model, base_url, api_key),
plus what users see of it (`display`, `price`) and where it is offered (`channels`: channel
instance ids; empty: every instance). Its `price` counts in `/usage` and the cost alert, as
`usage.prices` does for the model name it serves.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from adapters.access import secret
from bot.runtime.config.instances import instances

RESERVED = ("default",)  # `/model default` goes back: no choice may take the name


class ModelPrice(BaseModel):
    """US dollars (or any one currency) per million tokens (`usage.prices`, a choice's `price`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)


class ModelChoice(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)

    name: str = Field(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    provider: Literal["anthropic", "openai", "offline"]
    model: str | None = None
    base_url: str | None = None
    api_key: str = secret()
    display: str | None = None  # what users see; None: the name
    price: ModelPrice | None = None
    channels: list[str] = []  # channel instance ids where it is offered; empty: everywhere

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        if value.lower() in RESERVED:
            raise ValueError(f"{value!r} is the word that goes back to the default; choose another")
        return value

    @property
    def shown(self) -> str:
        return self.display or self.name


def check_choices(config: Any) -> None:
    """Names unique; every `channels` entry a configured instance; `quotas.soft_model` one of
    the choices. A ValueError names the key and the fix (the loader prefixes the file)."""
    choices: list[ModelChoice] = list(config.llm.choices)
    names = [c.name.lower() for c in choices]
    for name in names:
        if names.count(name) > 1:
            raise ValueError(f"llm.choices: the name {name!r} is used twice; names must differ")
    instances = _instances(config.channels)
    for choice in choices:
        for channel in choice.channels:
            if channel not in instances:
                raise ValueError(
                    f"llm.choices ({choice.name}): channels: no channel instance {channel!r};"
                    f" known: {sorted(instances)}"
                )
    soft = config.quotas.soft_model
    if soft is not None and soft.lower() not in names:
        raise ValueError(
            f"quotas.soft_model: {soft!r} is not in llm.choices (known: {sorted(names) or 'none'});"
            " add it there with its provider and model"
        )
    ratios = [
        getattr(config.quotas, scope).soft_ratio
        for scope in ("per_user", "per_conversation", "per_address", "per_api_key")
    ]
    if any(r is not None for r in ratios) and soft is None:
        raise ValueError(
            "quotas: a soft_ratio is set but quotas.soft_model is not: name the cheaper model"
            " (one of llm.choices) the conversation moves to past it"
        )


def _instances(channels: Any) -> set[str]:
    return {name for _, name, _ in instances(channels)}


def model_prices(config: Any, served: Mapping[str, str] | None = None) -> dict[str, ModelPrice]:
    """What a model's tokens cost (`bot usage`, `/usage`, the admin view, the cost alert):
    `usage.prices`, and each of `llm.choices` by its `price` under the model name its calls
    record (`served[name]` for a choice with no `model`: its provider's default)."""
    found: dict[str, ModelPrice] = dict(config.usage.prices)
    for choice in config.llm.choices:
        model = choice.model or (served or {}).get(choice.name)
        if choice.price is not None and model:
            found.setdefault(model, choice.price)
    return found
