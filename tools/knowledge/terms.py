"""Search terms from text: lower-cased words, and overlapping pairs of characters for CJK.

Chinese and Japanese are written without spaces, so a run of such characters is indexed as its
overlapping two-character pairs ("移民政策" -> 移民 民政 政策): a query then matches any text that
shares a word, without a dictionary.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+|[^\W_]+", re.UNICODE
)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")

# Words that carry no topic: matching them says nothing about whether a text is relevant.
STOP_WORDS = frozenset(
    """a about above after again all also am an and any are as at be been before being below
    between both but by can could did do does doing down during each few for from further had has
    have having he her here hers him his how i if in into is it its itself just me more most my
    no nor not now of off on once only or other our ours out over own same she should so some
    such than that the their theirs them then there these they this those through to too under
    until up very was we were what when where which while who whom why will with would you your
    yours please tell know want need like get give make much many thanks thank hi hello ok okay
    的 了 是 我 你 他 她 它 们 吗 呢 吧 啊 和 与 在 有 也 都 就 请 问 一下 什么 怎么 如何 可以""".split()  # noqa: SIM905
)


def terms(text: str) -> list[str]:
    """Every search term of `text`, in order, stop words and one-letter words dropped."""
    found: list[str] = []
    for token in _TOKEN.findall(text.lower()):
        if _CJK.match(token):
            if len(token) == 1:
                found.append(token)
            else:
                found.extend(token[i : i + 2] for i in range(len(token) - 1))
        elif len(token) > 1 and token not in STOP_WORDS:
            found.append(token)
    return [t for t in found if t not in STOP_WORDS]


def unique_terms(text: str) -> list[str]:
    return list(dict.fromkeys(terms(text)))
