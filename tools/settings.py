"""Settings of the built-in tools: the `tools:` and `knowledge:` sections of config.yaml.

They live in `tools`, so `tools` needs nothing from `bot`; the config loader mounts them as
sections. A tool reads them from `ctx.deps.settings` (the defaults when the app gave none, as in
unit tests).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tools.pii import KINDS, Kind, PiiMasker


def _secret(env: str) -> Any:
    # same markers as bot.runtime.config: kept out of repr, read from `env` when the key is absent
    return Field("", repr=False, json_schema_extra={"secret": True, "env": env})


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)


class PiiSettings(_Section):
    enabled: bool = True
    kinds: list[Kind] = list(KINDS)
    extra_patterns: dict[str, str] = {}  # label -> regex; a match becomes "[label]"
    # the user's own text too, before the model (and the stored history) sees it; off by
    # default: users often give their e-mail on purpose, for a tool to use
    mask_user_text: bool = False

    @field_validator("extra_patterns")
    @classmethod
    def _compiles(cls, value: dict[str, str]) -> dict[str, str]:
        PiiMasker.build((), value)  # raises ValueError naming the bad pattern
        return value

    def masker(self) -> PiiMasker | None:
        return PiiMasker.build(self.kinds, self.extra_patterns) if self.enabled else None

    def user_text_masker(self) -> PiiMasker | None:
        """For the user's messages: the same kinds and patterns, when `mask_user_text` is on."""
        return PiiMasker.build(self.kinds, self.extra_patterns) if self.mask_user_text else None


class ExchangeRateSettings(_Section):
    # {base} is the source currency, {key} the API key; the JSON answer must carry `rates`
    # or `conversion_rates` (open.er-api.com, exchangerate-api.com v6, frankfurter.app ...)
    url: str | None = "https://open.er-api.com/v6/latest/{base}"
    api_key: str = _secret("EXCHANGE_RATE_API_KEY")
    cache_s: float = Field(3600, ge=0)
    fallback_rates: dict[str, float] = {
        "USD/CNY": 7.24,
        "USD/HKD": 7.78,
        "USD/EUR": 0.92,
        "USD/GBP": 0.79,
        "USD/JPY": 151.0,
        "USD/SGD": 1.35,
        "USD/AUD": 1.52,
        "USD/CAD": 1.37,
    }  # "FROM/TO": rate, used (and marked is_estimate) when the API cannot be reached


class WebSearchSettings(_Section):
    backend: Literal["none", "searxng", "brave", "google"] = "none"
    url: str | None = None  # SearXNG base URL; for brave/google null means the vendor's API
    api_key: str = _secret("WEB_SEARCH_API_KEY")
    engine_id: str | None = None  # Google Programmable Search engine id (cx)
    max_results: int = Field(5, ge=1, le=20)
    suggested_sites: dict[str, str] = {}  # name -> URL, offered when search is unavailable


class OffTopicSettings(_Section):
    topic: str = ""  # one or two sentences on what the bot is for
    keywords: list[str] = []
    suggestion: str = (
        "That seems outside what I can help with here ({topic}). "
        "Is there something in that area I can do for you?"
    )


class IntakeField(_Section):
    type: Literal["string", "integer", "number", "boolean"] = "string"
    description: str = ""
    required: bool = True


class IntakeSettings(_Section):
    fields: dict[str, IntakeField] = {
        "age": IntakeField(type="integer", description="age in years"),
        "education": IntakeField(description="highest degree, e.g. Bachelor, Master, PhD"),
        "years_of_experience": IntakeField(type="integer", description="years of work"),
        "current_job_title": IntakeField(required=False),
        "industry": IntakeField(required=False),
    }


class PaymentSettings(_Section):
    currency: str = "USD"
    prices: dict[str, dict[str, float]] = {}  # service -> category -> amount
    methods: list[str] = ["CARD"]
    # {order_id} {amount} {currency} {method} {service} {category}; null: no online payment
    provider_url: str | None = None
    expiry_minutes: int = Field(30, ge=1, le=1440)


class NewsItem(_Section):
    title: str
    summary: str = ""
    date: str = ""
    source: str = ""
    url: str = ""
    category: str = ""


class NewsSettings(_Section):
    feeds: dict[str, list[str]] = {}  # category -> RSS/Atom feed URLs
    static_items: list[NewsItem] = []
    official_sources: dict[str, str] = {}  # name -> URL


class ToolsSettings(_Section):
    http_timeout_s: float = Field(5, gt=0)  # keep it below agent.tool_timeout_s: then degrade
    pii: PiiSettings = PiiSettings()
    exchange_rate: ExchangeRateSettings = ExchangeRateSettings()
    web_search: WebSearchSettings = WebSearchSettings()
    off_topic: OffTopicSettings = OffTopicSettings()
    intake: IntakeSettings = IntakeSettings()
    payment: PaymentSettings = PaymentSettings()
    news: NewsSettings = NewsSettings()


class KnowledgeSettings(_Section):
    dirs: list[str] = []
    max_results: int = Field(5, ge=1, le=50)
    passage_chars: int = Field(1200, ge=200, le=10000)


DEFAULT_TOOLS = ToolsSettings()
