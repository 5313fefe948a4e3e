"""PII masking of tool output before the model reads it: phones, e-mail, ID and card numbers.

Card numbers (Luhn) and mainland-China ID numbers (check digit, birth date) are only masked when
python-stdnum accepts them, phone numbers with a country code only when phonenumbers knows them
as valid, and passport and US social security numbers only right after their keyword, so that an
amount, an order or part number or a timestamp that merely looks similar is left alone. Hong Kong
identity cards are masked by their shape (letter, six digits, check digit in brackets): python-
stdnum has no Hong Kong module. A rule whose pattern has a group named `pii` replaces only that
group (the keyword before it stays).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

import phonenumbers
from phonenumbers import Leniency, NumberParseException, PhoneNumberMatcher
from stdnum import luhn
from stdnum.cn import ric
from stdnum.exceptions import ValidationError

Kind = Literal["email", "card", "national_id", "passport", "phone"]
KINDS: tuple[Kind, ...] = ("email", "card", "national_id", "passport", "phone")

Span = tuple[int, int]
Finder = Callable[[str], Iterable[Span]]  # the spans to mask in a text, in order
Check = Callable[[re.Match[str]], bool]


def _digits(text: str) -> str:
    return "".join(ch for ch in text if ch.isdigit())


def _card(match: re.Match[str]) -> bool:
    digits = _digits(match.group())
    return 13 <= len(digits) <= 19 and luhn.is_valid(digits)


def _cn_id(match: re.Match[str]) -> bool:
    """Check digit and birth date; not the birth place, whose county table lags new counties:
    an ID left unmasked is worse than a number masked by mistake."""
    number = match.group().upper()
    try:
        ric.get_birth_date(number)
    except ValidationError:
        return False
    return ric.calc_check_digit(number) == number[-1]


def _local_phone(match: re.Match[str]) -> bool:
    # trunk 0 + area code + subscriber number; 12 digits are more often three 24-hour times
    return 10 <= len(_digits(match.group())) <= 11


def _two_digit_area(match: re.Match[str]) -> bool:
    """0X XXXX XXXX is how Japan (03-1234-5678) and Australia (03 9123 4567) write a one-digit
    area code after the trunk 0. Without a country code phonenumbers reads a number only for a
    region it is told, so the shape picks the candidates and phonenumbers decides for these two
    regions: 05 1000 2000 is a number in neither, and stays."""
    for region in ("JP", "AU"):
        try:
            if phonenumbers.is_valid_number(phonenumbers.parse(match.group(), region)):
                return True
        except NumberParseException:
            pass
    return False


def _always(match: re.Match[str]) -> bool:
    return True


def regex_finder(pattern: re.Pattern[str], check: Check = _always) -> Finder:
    """The matches of `pattern` that `check` confirms (their `pii` group when there is one)."""
    group = "pii" if "pii" in pattern.groupindex else 0
    return lambda text: (m.span(group) for m in pattern.finditer(text) if check(m))


# A run of digits that may be a phone number: the matcher only looks at these (see phone_finder).
_PLUS_RUN = re.compile(r"(?<![\w@.+-])[+＋]\s?\d[\d ()./-]{5,25}\d")  # not inside a word
_DIGIT_RUN = re.compile(r"[+＋(]?\d[\d ()./-]{5,25}\d\)?")


def phone_finder(region: str | None = None) -> Finder:
    """Phone numbers phonenumbers' matcher finds valid: with a country code (+44 20 7946 0958)
    always, in `region`'s national format (03-1234-5678 for "JP") too when a region is given.

    The matcher reads only a window around each run of digits (one character either side, all
    it looks at): over a whole digit-rich 6 kB result it takes some 25 ms, over the windows a
    fraction of that.
    """
    runs = _DIGIT_RUN if region else _PLUS_RUN

    def find(text: str) -> Iterator[Span]:
        for run in runs.finditer(text):
            lo, hi = max(run.start() - 1, 0), run.end() + 1
            for found in PhoneNumberMatcher(text[lo:hi], region, leniency=Leniency.VALID):
                yield lo + found.start, lo + found.end

    return find


# Not after a Latin letter or digit (ORD15012345678 is an order number), but right after Chinese
# text (手机13800138000): `\w` would also refuse that. Nor before one (14837349186e is a hex id),
# but an extension may follow (415-555-2671x12, 415-555-2671 ext. 12).
_NOT_AFTER_ID = r"(?<![A-Za-z0-9_+])"
_NOT_BEFORE_ID = r"(?!\d|(?!(?i:x|ext\.?)\s?\d)[A-Za-z_])"
_NUMBER_SIGN = r"\s*(?:(?i:no|nr|num|number)\b\.?|#)?\s*[:：#]?\s*"
_PASSPORT_KEY = r"(?:(?i:passport)" + _NUMBER_SIGN + r"|(?:护照|護照)(?:号码?|號碼?)?\s*[:：]?\s*)"
_SSN_KEY = r"(?i:\bSSN|\bsocial[ -]security(?:[ -]number)?)" + _NUMBER_SIGN
# Every built-in kind but e-mail needs six digits in a row (single separators allowed): text
# without such a run, or without an "@", skips those rules, which is most text.
_LONG_NUMBER = re.compile(r"\d(?:[ ().+-]?\d){5}")
# not after . , / - (decimals, dates) and not followed by more digit groups (tables)
_NOT_AFTER_NUMBER = r"(?<![A-Za-z0-9_+.,/-])"
_NO_MORE_GROUPS = r"(?!\w|[.,/-]\d|[ -]\d)"


def _builtin(pattern: str, check: Check = _always) -> Finder:
    return regex_finder(re.compile(pattern), check)


def _national_phones() -> list[Finder]:
    """Phone numbers written without a country code, by their shape.

    Hand-written because phonenumbers reads such a number only for a region it is told, and
    one gateway serves users of many regions (`PiiMasker.build(phone_region=...)` adds one
    region's numbers in every national format). The shapes keep the guards that tell a phone
    number from a decimal, a date, an order number or a table of figures.
    """
    return [
        # mainland mobile
        _builtin(_NOT_AFTER_ID + r"1[3-9]\d[ -]?\d{4}[ -]?\d{4}" + _NOT_BEFORE_ID),
        # 415-555-2671, (415) 555-2671
        _builtin(_NOT_AFTER_ID + r"\(?\d{3}\)?[ .-]\d{3}[ .-]\d{4}" + _NOT_BEFORE_ID),
        # with a trunk 0, grouped: 020 7946 0958, (030) 12345678, 0412 345 678
        _builtin(
            _NOT_AFTER_NUMBER
            + r"(?:\(0\d{2,4}\)|0\d{2,4})[ -](?:\d{3,4}[ -]\d{3,4}|\d{6,8})"
            + _NO_MORE_GROUPS,
            _local_phone,
        ),
        # 03-1234-5678, (03) 9123 4567
        _builtin(
            _NOT_AFTER_NUMBER + r"(?:\(0\d\)|0\d)[ -]?\d{4}[ -]\d{4}" + _NO_MORE_GROUPS,
            _two_digit_area,
        ),
    ]


# Order matters: e-mail first (its digits must not be taken for a phone), cards before phones.
BUILTIN: dict[Kind, list[Finder]] = {
    "email": [_builtin(r"[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")],
    "card": [
        # IIN ranges of the card networks (2-6), so timestamps and ids starting with 1 stay
        _builtin(r"(?<![\d.,])(?:[3-6]\d{3}|2[2-7]\d{2})(?:[ -]?\d){9,15}(?![\d.,]\d)", _card)
    ],
    "national_id": [
        _builtin(r"(?<![\w])[1-9]\d{5}(?:19|20)\d{2}[01]\d[0-3]\d{4}[\dXx](?!\w)", _cn_id),
        _builtin(r"(?<![\w])[A-Z]{1,2}\d{6}\s?\([0-9A]\)"),  # Hong Kong identity card
        # US social security: the bare shape is also a part or case number
        _builtin(_SSN_KEY + r"(?P<pii>\d{3}-\d{2}-\d{4})(?![\w-])"),
    ],
    # the bare shape is also an order, PO or SKU number: only after the keyword
    "passport": [_builtin(_PASSPORT_KEY + r"(?P<pii>[A-Z]{0,2}\d{6,9})(?![\w-])")],
    "phone": [phone_finder(), *_national_phones()],
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

    rules: tuple[tuple[Finder, str], ...]
    builtin: int = 0  # how many of the rules are built-in ones (these use the pre-checks)

    @classmethod
    def build(
        cls,
        kinds: Collection[str] = KINDS,
        extra_patterns: Mapping[str, str] | None = None,
        *,
        phone_region: str | None = None,
    ) -> PiiMasker:
        """Built-in `kinds` (in their fixed order), then `extra_patterns` (label -> regex).

        `phone_region` (a region code such as "JP") also masks that region's national-format
        phone numbers that phonenumbers finds valid, beyond the shapes masked everywhere.
        """
        unknown = set(kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown PII kinds {sorted(unknown)}; known: {list(KINDS)}")
        if phone_region is not None and phone_region not in phonenumbers.SUPPORTED_REGIONS:
            raise ValueError(f"unknown phone region {phone_region!r}; use a code such as 'JP'")
        rules = [(find, LABELS[k]) for k in KINDS if k in kinds for find in BUILTIN[k]]
        if phone_region is not None and "phone" in kinds:
            rules.append((phone_finder(phone_region), LABELS["phone"]))
        builtin = len(rules)
        for label, pattern in (extra_patterns or {}).items():
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"PII pattern {label!r} is not a valid regex: {exc}") from exc
            rules.append((regex_finder(compiled), f"[{label}]"))
        return cls(tuple(rules), builtin)

    def mask(self, text: str) -> str:
        has_at = "@" in text
        has_number = _LONG_NUMBER.search(text) is not None
        for i, (find, label) in enumerate(self.rules):
            if i < self.builtin and not (has_at if label == LABELS["email"] else has_number):
                continue
            text = _replace(text, find(text), label)
        return text


def _replace(text: str, spans: Iterable[Span], label: str) -> str:
    """`text` with each span (in order; one overlapping an earlier one is skipped) as `label`."""
    pieces: list[str] = []
    done = 0
    for start, end in spans:
        if start >= done:
            pieces += (text[done:start], label)
            done = end
    if not pieces:
        return text
    pieces.append(text[done:])
    return "".join(pieces)


DEFAULT_MASKER = PiiMasker.build()
