"""The model's markdown as Telegram HTML: balanced by construction, with the plain text beside it.

Telegram rejects a whole message over one unbalanced tag ("can't parse entities"), and streamed
text is cut anywhere. Every tag here is written from the parsed tree, so it closes where it
opens; markdown that does not pair up stays literal text, and an unclosed code fence (a stream
cut mid-block) closes at the end. Telegram counts the 4096 limit on the text after entity
parsing, in UTF-16 code units: `rendered_length` measures exactly that.
"""

from __future__ import annotations

import html
import re

from adapters.markdown import Renderer, grid, may_lengthen

_TAG = re.compile(r"<[^>]*>")
_SAFE_URL = re.compile(r"(https?://|tg://|mailto:)[^\s<>\"]+", re.IGNORECASE)
# Telegram knows only these named entities: &lt; &gt; &amp; &quot;.
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_ATTRIBUTE_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"})


def _wrap(tag: str, inner: str) -> str:
    return f"<{tag}>{inner}</{tag}>" if inner else ""


class TelegramHtml(Renderer):
    """parse_mode="HTML" as the Bot API documents it."""

    def text(self, text: str) -> str:
        return text.translate(_ESCAPES)

    def strong(self, inner: str) -> str:
        return _wrap("b", inner)

    def em(self, inner: str) -> str:
        return _wrap("i", inner)

    def strike(self, inner: str) -> str:
        return _wrap("s", inner)

    def spoiler(self, inner: str) -> str:
        return _wrap("tg-spoiler", inner)

    def code_inline(self, code: str) -> str:
        return _wrap("code", self.text(code))

    def code_block(self, code: str, language: str) -> str:
        if language:
            return f'<pre><code class="language-{language}">{self.text(code)}</code></pre>'
        return _wrap("pre", self.text(code))

    def link(self, inner: str, url: str) -> str:
        if not _SAFE_URL.fullmatch(url):  # relative, ftp:, data: ... have nowhere to go
            return inner
        return f'<a href="{url.translate(_ATTRIBUTE_ESCAPES)}">{inner}</a>'

    def heading(self, inner: str, level: int) -> str:
        return _wrap("b", inner)

    def blockquote(self, inner: str) -> str:
        # Telegram refuses nested quotes. Every "<" in text is escaped: these are our own tags.
        return _wrap("blockquote", inner.replace("<blockquote>", "").replace("</blockquote>", ""))

    def table(self, rows: list[list[str]]) -> str:
        return self.code_block(grid(rows), "")


_HTML = TelegramHtml()
_PLAIN = Renderer()


def to_html(markdown: str) -> str:
    """Telegram HTML (parse_mode="HTML") for `markdown`; always well-formed."""
    return _HTML.render(markdown)


def visible_text(rendered: str) -> str:
    """What Telegram shows for our HTML: the text after entity parsing (and the plain fallback)."""
    return html.unescape(_TAG.sub("", rendered))


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def rendered_length(markdown: str, *, limit: int | None = None) -> int:
    """Length as Telegram counts it: UTF-16 code units of the text after entity parsing.

    Rendering drops markup and adds none (but for tables), so text within `limit` as written is
    within it rendered: then the written length is returned without rendering (measuring is on
    the hot path). Telegram's HTML without its tags is the plain rendering, which is cheaper.
    """
    written = utf16_len(markdown)
    if limit is not None and written <= limit and not may_lengthen(markdown):
        return written
    return utf16_len(_PLAIN.render(markdown))
