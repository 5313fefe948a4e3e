"""PII masking of tool output before the model reads it: phones, e-mail, ID and card numbers.

Card and mainland-China ID numbers are only masked when their check digits agree, and passport
and US social security numbers only right after their keyword, so that an amount, an order or
part number or a timestamp that merely looks similar is left alone. A rule whose pattern has a
group named `pii` replaces only that group (the keyword before it stays).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Literal

Kind = Literal["email", "card", "national_id", "passport", "phone"]
KINDS: tuple[Kind, ...] = ("email", "card", "national_id", "passport", "phone")

_CN_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_CN_ID_CHECK = "10X98765432"


def luhn_ok(digits: str) -> bool:
    """The Luhn checksum every payment card number carries."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        n = int(ch)
        if i % 2:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return total % 10 == 0


def _digits(text: str) -> str:
    return "".join(ch for ch in text if ch.isdigit())


def _card(match: re.Match[str]) -> bool:
    digits = _digits(match.group())
    return 13 <= len(digits) <= 19 and luhn_ok(digits)


def _cn_id(match: re.Match[str]) -> bool:
    text = match.group().upper()
    total = sum(int(d) * w for d, w in zip(text[:17], _CN_ID_WEIGHTS, strict=True))
    return _CN_ID_CHECK[total % 11] == text[17]


def _phone(match: re.Match[str]) -> bool:
    return 8 <= len(_digits(match.group())) <= 15  # E.164 allows at most 15 digits


def _local_phone(match: re.Match[str]) -> bool:
    # trunk 0 + area code + subscriber number; 12 digits are more often three 24-hour times
    return 10 <= len(_digits(match.group())) <= 11


def _always(match: re.Match[str]) -> bool:
    return True


Check = Callable[[re.Match[str]], bool]
_NOT_IN_WORD = r"(?<![\w@.+-])"
# Not after a Latin letter or digit (ORD15012345678 is an order number), but right after Chinese
# text (手机13800138000): `\w` would also refuse that.
_NOT_AFTER_ID = r"(?<![A-Za-z0-9_+])"
_NUMBER_SIGN = r"\s*(?:(?i:no|nr|num|number)\b\.?|#)?\s*[:：#]?\s*"
_PASSPORT_KEY = r"(?:(?i:passport)" + _NUMBER_SIGN + r"|(?:护照|護照)(?:号码?|號碼?)?\s*[:：]?\s*)"
_SSN_KEY = r"(?i:\bSSN|\bsocial[ -]security(?:[ -]number)?)" + _NUMBER_SIGN
# Every built-in kind but e-mail needs six digits in a row (single separators allowed): text
# without such a run, or without an "@", skips those rules, which is most text.
_LONG_NUMBER = re.compile(r"\d(?:[ ().+-]?\d){5}")

# Order matters: e-mail first (its digits must not be taken for a phone), cards before phones.
BUILTIN: dict[Kind, list[tuple[re.Pattern[str], Check]]] = {
    "email": [(re.compile(r"[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"), _always)],
    "card": [
        # IIN ranges of the card networks (2-6), so timestamps and ids starting with 1 stay
        (re.compile(r"(?<![\d.,])(?:[3-6]\d{3}|2[2-7]\d{2})(?:[ -]?\d){9,15}(?![\d.,]\d)"), _card)
    ],
    "national_id": [
        (re.compile(r"(?<![\w])[1-9]\d{5}(?:19|20)\d{2}[01]\d[0-3]\d{4}[\dXx](?!\w)"), _cn_id),
        (re.compile(r"(?<![\w])[A-Z]{1,2}\d{6}\s?\([0-9A]\)"), _always),  # Hong Kong identity card
        # US social security: the bare shape is also a part or case number
        (re.compile(_SSN_KEY + r"(?P<pii>\d{3}-\d{2}-\d{4})(?![\w-])"), _always),
    ],
    # the bare shape is also an order, PO or SKU number: only after the keyword
    "passport": [(re.compile(_PASSPORT_KEY + r"(?P<pii>[A-Z]{0,2}\d{6,9})(?![\w-])"), _always)],
    "phone": [
        # no "." separators: +12.345.678 is an amount
        (re.compile(_NOT_IN_WORD + r"\+\d{1,3}(?:[ -]?\(?\d{1,5}\)?){1,5}(?![\d])"), _phone),
        (re.compile(_NOT_AFTER_ID + r"1[3-9]\d[ -]?\d{4}[ -]?\d{4}(?!\d)"), _phone),  # mainland
        # 415-555-2671, (415) 555-2671
        (re.compile(_NOT_AFTER_ID + r"\(?\d{3}\)?[ .-]\d{3}[ .-]\d{4}(?!\d)"), _phone),
        # national format with a trunk 0, grouped: 020 7946 0958, (030) 12345678, 0412 345 678;
        # not after . , / - (decimals, dates) and not followed by more digit groups (tables)
        (
            re.compile(
                r"(?<![A-Za-z0-9_+.,/-])(?:\(0\d{2,4}\)|0\d{2,4})[ -](?:\d{3,4}[ -]\d{3,4}|\d{6,8})"
                r"(?!\w|[.,/-]\d|[ -]\d)"
            ),
            _local_phone,
        ),
    ],
}
LABELS: dict[Kind, str] = {
    "email": "[email]",
    "card": "[card number]",
    "national_id": "[id number]",
    "passport": "[passport number]",
    "phone": "[phone]",
}


@dataclass(frozen=True, slots=True)
class PiiMasker:
    """Replaces personal data in text with a label such as `[phone]`; cheap when nothing matches."""

    rules: tuple[tuple[re.Pattern[str], Check, str], ...]
    builtin: int = 0  # how many of the rules are built-in ones (these use the pre-checks)

    @classmethod
    def build(
        cls, kinds: Collection[str] = KINDS, extra_patterns: Mapping[str, str] | None = None
    ) -> PiiMasker:
        """Built-in `kinds` (in their fixed order), then `extra_patterns` (label -> regex)."""
        unknown = set(kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown PII kinds {sorted(unknown)}; known: {list(KINDS)}")
        rules = [(p, check, LABELS[k]) for k in KINDS if k in kinds for p, check in BUILTIN[k]]
        builtin = len(rules)
        for label, pattern in (extra_patterns or {}).items():
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"PII pattern {label!r} is not a valid regex: {exc}") from exc
            rules.append((compiled, _always, f"[{label}]"))
        return cls(tuple(rules), builtin)

    def mask(self, text: str) -> str:
        has_at = "@" in text
        has_number = _LONG_NUMBER.search(text) is not None
        for i, (pattern, check, label) in enumerate(self.rules):
            if i < self.builtin and not (has_at if label == LABELS["email"] else has_number):
                continue
            text = pattern.sub(_replacer(check, label), text)
        return text


def _replacer(check: Check, label: str) -> Callable[[re.Match[str]], str]:
    """A `re.sub` replacement: the label where `check` confirms the match (in place of its `pii`
    group when it has one), else the match."""

    def replace(match: re.Match[str]) -> str:
        if not check(match):
            return match.group()
        if "pii" not in match.re.groupindex:
            return label
        whole, start = match.group(), match.start()
        return whole[: match.start("pii") - start] + label + whole[match.end("pii") - start :]

    return replace


DEFAULT_MASKER = PiiMasker.build()
