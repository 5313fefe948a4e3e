"""The status line a channel shows while a tool runs, made from the tool's description."""

from __future__ import annotations

import re

_CLAUSE_END = re.compile(r"[.;:!?(]|,\s|\s[—–-]\s")
_SHORT_CVC = re.compile(r"[^aeiou]*[aeiou][bdfgklmnprtvz]")  # get, stop, plan: double the last
STATUS_CHARS = 48
# words a cut line should not end on
_DANGLING = frozenset(
    {"a", "an", "and", "as", "at", "by", "for", "from", "in", "of", "on", "or", "that", "the"}
    | {"this", "to", "whether", "with"}
)


def status_from(description: str) -> str:
    """A status line from a tool description: its first clause, the imperative verb PEP 257 asks
    for made an -ing form ("Get the time, in a zone." → "Getting the time"), cut at a word."""
    clause = _CLAUSE_END.split(description, 1)[0].strip()
    verb, _, rest = clause.partition(" ")
    # only an imperative verb becomes "-ing": not "Returns", not "The" or "A"
    imperative = verb.isalpha() and verb.lower() not in _DANGLING
    if imperative and (not verb.endswith("s") or verb.endswith("ss")):
        clause = f"{_gerund(verb)} {rest}".strip()
    if len(clause) > STATUS_CHARS:
        words = clause[: STATUS_CHARS + 1].split()[:-1]  # the last word may be cut
        while len(words) > 1 and words[-1].lower() in _DANGLING:
            words.pop()
        clause = " ".join(words)
    return clause


def _gerund(verb: str) -> str:
    word = verb.lower()
    if word.endswith("ie"):
        return verb[:-2] + "ying"
    if word.endswith("e") and len(word) > 2 and not word.endswith(("ee", "ye", "oe")):
        return verb[:-1] + "ing"
    if _SHORT_CVC.fullmatch(word):
        return verb + verb[-1] + "ing"
    return verb + "ing"
