"""The model's markdown as Feishu card markdown, from the one parser (adapters/markdown.py).

Card markdown reads `**bold**`, `*italic*`, `~~strike~~`, `` `code` ``, fences, `[label](url)`,
`> quotes` and a few tags (`<at>`, `<font>`); literal text has those characters written as HTML
entities (`&#42;` for `*`), which Feishu shows as the character. The platform's limit is on the
card's JSON (30 KB), so length is measured on the rendered markdown as JSON-encoded UTF-8:
`rendered_length`.
"""

from __future__ import annotations

import json
import re

from adapters.markdown import Renderer, grid

_BACKTICKS = re.compile(r"`+")
_SAFE_URL = re.compile(r"(https?://|mailto:)[^\s<>()\[\]]+", re.IGNORECASE)
_ESCAPES = str.maketrans(
    {
        "<": "&lt;",
        ">": "&gt;",
        "*": "&#42;",
        "_": "&#95;",
        "~": "&#126;",
        "`": "&#96;",
        "[": "&#91;",
        "]": "&#93;",
    }
)


class CardMarkdown(Renderer):
    """The markdown element of a card (JSON 2.0)."""

    def text(self, text: str) -> str:
        return text.translate(_ESCAPES)

    def strong(self, inner: str) -> str:
        return f"**{inner}**" if inner else ""

    def em(self, inner: str) -> str:
        return f"*{inner}*" if inner else ""

    def strike(self, inner: str) -> str:
        return f"~~{inner}~~" if inner else ""

    def code_inline(self, code: str) -> str:
        if "`" in code:  # a backtick cannot be escaped inside code: show it as text
            return self.text(code)
        return f"`{code}`"

    def code_block(self, code: str, language: str) -> str:
        # Longer than any run of backticks inside: a line of them must not close the fence
        # early and let the rest (an `<at id=all>` tag, say) render as markup.
        longest = max((len(run) for run in _BACKTICKS.findall(code)), default=0)
        fence = "`" * max(3, longest + 1)
        return f"{fence}{language}\n{code}\n{fence}"

    def link(self, inner: str, url: str) -> str:
        if not _SAFE_URL.fullmatch(url):  # relative, data:, javascript: … go nowhere
            return inner
        return f"[{inner}]({url})"

    def heading(self, inner: str, level: int) -> str:
        return self.strong(inner)

    def blockquote(self, inner: str) -> str:
        return "\n".join(f"> {line}" if line else ">" for line in inner.split("\n"))

    def table(self, rows: list[list[str]]) -> str:
        return self.code_block(grid(rows), "")


_CARD = CardMarkdown()
_PLAIN = Renderer()


def to_card_markdown(markdown: str) -> str:
    return _CARD.render(markdown)


def plain_text(markdown: str, limit: int = 100) -> str:
    """The visible text, cut to `limit` characters (the chat list's summary of a card)."""
    text = " ".join(_PLAIN.render(markdown).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def json_size(text: str) -> int:
    """Bytes `text` takes inside a card's JSON (UTF-8, escapes counted)."""
    return len(json.dumps(text, ensure_ascii=False).encode()) - 2


def rendered_length(markdown: str) -> int:
    """Length as the platform counts it: the card markdown's JSON-encoded bytes."""
    return json_size(to_card_markdown(markdown))
