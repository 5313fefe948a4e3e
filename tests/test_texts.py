"""The gateway's text catalogues: every language has every key, with the same fields."""

from __future__ import annotations

import string
import tomllib
from collections.abc import Mapping
from typing import Any

import pytest

from agent.providers.base import ProviderError, ProviderRejected, ProviderUnavailable
from agent.providers.classify import classify
from content.texts import DEFAULT_LANGUAGE, LANGUAGES, LOCALES, Text, catalogue, negotiate, t

OTHERS = [lang for lang in LANGUAGES if lang != DEFAULT_LANGUAGE]


def _forms(text: Text) -> list[str]:
    return [text] if isinstance(text, str) else list(text.values())


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def test_every_language_has_a_catalogue_file_and_nothing_more() -> None:
    assert sorted(path.stem for path in LOCALES.glob("*.toml")) == sorted(LANGUAGES)


@pytest.mark.parametrize("language", OTHERS)
def test_every_catalogue_has_every_key_and_no_other(language: str) -> None:
    reference, other = catalogue(DEFAULT_LANGUAGE), catalogue(language)
    assert sorted(set(reference) - set(other)) == [], f"{language}.toml lacks these keys"
    assert sorted(set(other) - set(reference)) == [], f"{language}.toml has keys en.toml lacks"


@pytest.mark.parametrize("language", OTHERS)
def test_every_translation_has_the_fields_of_the_english_text(language: str) -> None:
    reference = catalogue(DEFAULT_LANGUAGE)
    wrong = {}
    for key, text in catalogue(language).items():
        expected = set().union(*(_fields(form) for form in _forms(reference[key])))
        for form in _forms(text):
            if _fields(form) != expected:
                wrong[key] = (sorted(_fields(form)), sorted(expected))
    assert wrong == {}


@pytest.mark.parametrize("language", LANGUAGES)
def test_plural_texts_have_other_and_only_cldr_categories(language: str) -> None:
    categories = {"zero", "one", "two", "few", "many", "other"}
    for key, text in catalogue(language).items():
        if not isinstance(text, str):
            assert "other" in text and set(text) <= categories, key
            assert all("{count}" in form for form in text.values()), key


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_text_formats_and_differs_from_english_where_it_should(language: str) -> None:
    """Each text fills in with sample fields; a translation left in English is caught."""
    english = catalogue(DEFAULT_LANGUAGE)
    same = []
    for key, text in catalogue(language).items():
        for form in _forms(text):
            form.format(**{name: "x" for name in _fields(form)})
        if language != DEFAULT_LANGUAGE and text == english[key] and not _symbolic(text):
            same.append(key)
    assert same == [], f"{language}: still in English"


def _symbolic(text: Text) -> bool:
    """Words some languages share with English (a borrowed noun)."""
    return isinstance(text, str) and text in {
        "audio",
        "video",
        "document",
        "image",
        "photo",
        "GIFs",
    }


def test_the_files_are_plain_toml_tables() -> None:
    for path in LOCALES.glob("*.toml"):
        with path.open("rb") as file:
            assert isinstance(tomllib.load(file), Mapping)


@pytest.mark.parametrize(
    ("tag", "language"),
    [
        ("de", "de"),
        ("de-AT", "de"),
        ("de_CH", "de"),
        ("EN-us", "en"),
        ("fr-CA", "fr"),
        ("zh-CN", "zh"),
        ("zh-Hans-CN", "zh"),
        ("zh_TW", "zh"),
        ("pt-BR", None),
        ("xx", None),
        ("", None),
        (None, None),
        ("not a language tag at all", None),
        ("de-" + "x" * 100, None),
        ("de,en;q=0.5", "de"),
        ("de_DE.UTF-8", "de"),
        ("C.UTF-8", None),
        ("ja, de;q=0.5", "de"),
        ("en;q=0.4, fr-CH, fr;q=0.9", "fr"),
        ("de;q=0, fr;q=0.1", "fr"),
        ("*", None),
        ("und", None),
        ("C", None),
        ("i-klingon", None),
        ("\x00", None),
    ],
)
def test_a_tag_negotiates_to_one_of_ours_or_none(tag: str | None, language: str | None) -> None:
    assert negotiate(tag) == language


def test_an_unknown_language_gets_the_english_text() -> None:
    assert t("pt-BR", "turn.stopped") == t(None, "turn.stopped") == "⏹ Stopped."
    assert t("de", "turn.stopped") == "⏹ Angehalten."


def test_an_unknown_key_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        t("de", "turn.no_such_text")


def test_plurals_and_numbers_follow_the_language() -> None:
    assert t("en", "quota.messages.day", count=1) == "1 message a day"
    assert t("en", "quota.tokens.day", count=20000) == "20,000 tokens a day"
    assert t("de", "quota.tokens.day", count=20000) == "20.000 Tokens am Tag"
    # French counts 0 and 1 as singular, and a round million takes "de"
    assert t("fr", "quota.messages.day", count=0) == "0 message par jour"
    assert t("fr", "quota.messages.minute", count=1000000) == (
        "1\u202f000\u202f000 de messages par minute"
    )
    assert t("zh", "quota.messages.day", count=1) == "每天 1 条消息"


def test_a_model_failure_says_its_own_text_in_every_language() -> None:
    """Each `user_key` a provider error carries is a text, and in English it is what the error
    says (`Sorry — ` and its `user_message`), so the log and the chat agree."""
    unavailable, rejected = ProviderUnavailable("down"), ProviderRejected("refused")
    fields: dict[str, Any] = {"who": "m", "key_hint": "K", "kind": None, "code": None}
    errors = [unavailable, rejected, classify(status=401, message="bad key", **fields)]
    errors.append(classify(status=402, message="no credit", **fields))
    assert [e.user_key for e in errors] == [
        "provider.unavailable",
        "provider.rejected",
        "provider.key_refused",
        "provider.out_of_credit",
    ]
    for error in errors:
        assert error.user_key is not None
        assert t("en", error.user_key) == f"Sorry — {error.user_message}"
        assert t("de", error.user_key).startswith("Entschuldigung — ")
    assert ProviderError("x", user_message="custom").user_key is None  # said as it is
