"""The gateway's own words (not the model's) in every language it speaks: `t(language, key, **fields)`.

Why this shape: the catalogues are TOML files beside this module (`content/locales/<lang>.toml`),
read with the standard library's `tomllib` on first use, so a checkout runs with no compile step
(gettext's `.mo` files would need one, or binaries committed beside their sources). Babel, the
maintained CLDR library, does what is easy to get wrong by hand: reading a language tag
(`de-AT`, `zh_Hans_CN`, `EN-us`, legacy aliases) into one of ours, the plural category of a
count in each language (`one`/`many`/`other`: French counts 0 as singular, Chinese has no
plural), and numbers as each language writes them (1,000 / 1.000 / 1 000).

A text is a string with `str.format` fields (`{limit}`), or, where a count changes the words, a
table of CLDR plural categories (`other` always present) chosen by the `count` field. Integer
fields are written in the language's number format. A key is `area.what` (`turn.stopped`); an
unknown key is a programming error (`KeyError`); a key one language lacks falls back to English
(tests/test_texts.py fails on that before it ships). Simplified Chinese answers every `zh` tag
(Traditional-script readers read it far better than English) until a `zh-Hant` catalogue exists.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from functools import cache, lru_cache
from pathlib import Path
from typing import Final

from babel import Locale, UnknownLocaleError
from babel.numbers import format_decimal

LANGUAGES: Final = ("en", "de", "fr", "zh")
DEFAULT_LANGUAGE: Final = "en"
LOCALES: Final = Path(__file__).with_name("locales")

Text = str | Mapping[str, str]  # plain, or by plural category


@cache
def catalogue(language: str) -> Mapping[str, Text]:
    """One language's texts by key (nested TOML tables flattened to `a.b` keys)."""
    if language not in LANGUAGES:
        raise ValueError(f"no catalogue for {language!r}; known: {', '.join(LANGUAGES)}")
    with (LOCALES / f"{language}.toml").open("rb") as file:
        return _flatten(tomllib.load(file))


def _flatten(table: Mapping[str, object], prefix: str = "") -> dict[str, Text]:
    """`{turn: {stopped: "…"}}` → `{"turn.stopped": "…"}`; a table of plural categories (one
    holding `other`) is one text."""
    flat: dict[str, Text] = {}
    for name, value in table.items():
        key = f"{prefix}{name}"
        if isinstance(value, str):
            flat[key] = value
        elif isinstance(value, dict) and "other" in value:
            flat[key] = {str(k): str(v) for k, v in value.items()}
        elif isinstance(value, dict):
            flat |= _flatten(value, f"{key}.")
        else:
            raise ValueError(f"{key}: a text is a string or a table of plural forms, not {value!r}")
    return flat


NO_PREFERENCE: Final = frozenset({"c", "posix", "und"})  # Babel reads these as English


@lru_cache(maxsize=512)  # the tags come from clients: a bounded cache
def negotiate(tag: str | None) -> str | None:
    """The language of ours a tag asks for (`de-AT` → `de`, `de_DE.UTF-8` → `de`; of a list,
    `ja, de;q=0.5`, the most preferred one we speak), or None: none asked, or none we speak (the
    caller falls back to the next choice)."""
    if not tag or len(tag) > MAX_TAGS_CHARS:
        return None
    for one in _by_preference(tag):
        language = _ours(one)
        if language is not None:
            return language
    return None


MAX_TAGS_CHARS: Final = 256  # an Accept-Language header of a dozen languages
MAX_TAG_CHARS: Final = 35  # the longest well-formed tag anyone sends


def _by_preference(tags: str) -> list[str]:
    """An Accept-Language list's tags, most wanted first (`q=0`: not wanted)."""
    weighted: list[tuple[float, str]] = []
    for entry in tags.split(","):
        one, _, params = entry.partition(";")
        weight = 1.0
        if params.strip().startswith("q="):
            try:
                weight = float(params.strip()[2:])
            except ValueError:
                continue
        if weight > 0:
            weighted.append((weight, one.strip()))
    weighted.sort(key=lambda pair: -pair[0])  # stable: equal weights keep their order
    return [one for _, one in weighted]


def _ours(one: str) -> str | None:
    # POSIX locale names carry an encoding and a modifier: de_DE.UTF-8@euro
    one = one.partition(".")[0].partition("@")[0]
    if not one or len(one) > MAX_TAG_CHARS or one.lower() in NO_PREFERENCE:
        return None
    try:
        language = Locale.parse(one.replace("-", "_")).language
    except (ValueError, TypeError, UnknownLocaleError):
        language = one.replace("_", "-").partition("-")[0].lower()
    return language if language in LANGUAGES else None


def has(key: str) -> bool:
    """Whether `key` is a text of the catalogue (rather than a text of its own)."""
    return key in catalogue(DEFAULT_LANGUAGE)


def t(language: str | None, key: str, /, **fields: object) -> str:
    """The text `key` in `language` (any tag; unknown or None: English), its fields filled in.
    A plural text is chosen by the `count` field."""
    lang = negotiate(language) or DEFAULT_LANGUAGE
    text = catalogue(lang).get(key)
    if text is None:
        text = catalogue(DEFAULT_LANGUAGE)[key]  # KeyError: a key no catalogue has
    if not isinstance(text, str):
        count = fields.get("count")
        form = Locale(lang).plural_form(count) if isinstance(count, int | float) else "other"
        text = text.get(form, text["other"])
    if not fields:
        return text
    shown = {
        name: _number(value, lang)
        if isinstance(value, int) and not isinstance(value, bool)
        else value
        for name, value in fields.items()
    }
    return text.format(**shown)


def _number(value: int, language: str) -> str:
    return str(format_decimal(value, locale=language))
