"""The model's markdown as Telegram HTML: balanced by construction, with the plain text beside it.

Telegram rejects a whole message over one unbalanced tag ("can't parse entities"), and streamed
text is cut anywhere. So every tag written here is closed where it opens; markdown that does not
pair up stays literal text, and an unclosed code fence (a stream cut mid-block) closes at the end.
Telegram counts the 4096 limit on the text after entity parsing, in UTF-16 code units:
`rendered_length` measures exactly that.
"""

from __future__ import annotations

import html
import re

_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+#.-]*)[ \t]*$")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")
_QUOTE = re.compile(r"^>\s?(.*)$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_RULE = re.compile(r"^\s*([-*_])(\s*\1){2,}\s*$")
_TAG = re.compile(r"<[^>]*>")
_SAFE_URL = re.compile(r"^(https?://|tg://|mailto:)[^\s<>\"]+$", re.IGNORECASE)

# One line at a time; at each position the first alternative that matches wins.
# A marker that never closes makes its alternative scan on to the end of the line, and a line of
# thousands of them (a model stuck repeating `[a`) would cost quadratic time: so a span is at most
# SPAN characters, and a link label or address stops at the next bracket. The cost is linear.
SPAN = 500
_BODY = rf"\S(?:.{{0,{SPAN - 2}}}?\S)?"  # starts and ends with a non-space
_INLINE = re.compile(
    r"(?=[`!\[*_~|])"  # most positions start no span: one cheap test rejects them
    rf"(?:(?P<code>`+)(?P<code_body>.{{1,{SPAN}}}?)(?P=code)"
    r"|!?\[(?P<label>[^\[\]\n]*)\]\((?P<url>[^)\[\]\s]+)\)"
    rf"|\*\*\*(?P<bolditalic>{_BODY})\*\*\*"
    rf"|\*\*(?P<bold>{_BODY})\*\*"
    rf"|(?<!\w)__(?P<bold2>{_BODY})__(?!\w)"
    rf"|~~(?P<strike>{_BODY})~~"
    rf"|\|\|(?P<spoiler>{_BODY})\|\|"
    r"|(?<![\w*])\*(?P<italic>[^\s*](?:[^*]*?[^\s*])?)\*(?![\w*])"
    r"|(?<!\w)_(?P<italic2>[^\s_](?:[^_]*?[^\s_])?)_(?!\w))"
)
_WRAP = {
    "bold": "b",
    "bold2": "b",
    "strike": "s",
    "spoiler": "tg-spoiler",
    "italic": "i",
    "italic2": "i",
}


def to_html(markdown: str) -> str:
    """Telegram HTML (parse_mode="HTML") for `markdown`; always well-formed."""
    out: list[str] = []
    lines = markdown.split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        fence = _FENCE.match(line)
        if fence:
            end = index + 1
            while end < len(lines) and not _FENCE.match(lines[end]):
                end += 1
            out.append(_code_block(fence.group(1), "\n".join(lines[index + 1 : end])))
            index = end + 1
            continue
        if _QUOTE.match(line):
            end = index
            while end < len(lines) and _QUOTE.match(lines[end]):
                end += 1
            quoted = [_inline(_QUOTE.match(q).group(1)) for q in lines[index:end]]  # type: ignore[union-attr]
            out.append("<blockquote>" + "\n".join(quoted) + "</blockquote>")
            index = end
            continue
        out.append(_line(line))
        index += 1
    return "\n".join(out)


def visible_text(rendered: str) -> str:
    """What Telegram shows for our HTML: the text after entity parsing (and the plain fallback)."""
    return html.unescape(_TAG.sub("", rendered))


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def rendered_length(markdown: str, *, limit: int | None = None) -> int:
    """Length as Telegram counts it: UTF-16 code units of the text after entity parsing.

    Rendering only ever drops markup, so text within `limit` as written is within it rendered:
    then the written length is returned without rendering (measuring is on the hot path).
    """
    written = utf16_len(markdown)
    if limit is not None and written <= limit:
        return written
    return utf16_len(visible_text(to_html(markdown)))


def _code_block(language: str, code: str) -> str:
    body = html.escape(code, quote=False)
    if language:
        return f'<pre><code class="language-{html.escape(language)}">{body}</code></pre>'
    return f"<pre>{body}</pre>"


def _line(line: str) -> str:
    heading = _HEADING.match(line)
    if heading:
        return f"<b>{_inline(heading.group(1))}</b>"
    if _RULE.match(line):
        return "───"  # no longer than the shortest rule: rendering never lengthens text
    bullet = _BULLET.match(line)
    if bullet:
        return f"{bullet.group(1)}• {_inline(bullet.group(2))}"
    return _inline(line)


def _inline(text: str) -> str:
    out: list[str] = []
    position = 0
    for match in _INLINE.finditer(text):
        out.append(html.escape(text[position : match.start()], quote=False))
        out.append(_span(match))
        position = match.end()
    out.append(html.escape(text[position:], quote=False))
    return "".join(out)


def _span(match: re.Match[str]) -> str:
    kind = match.lastgroup
    if kind == "code_body":
        return f"<code>{html.escape(match.group('code_body'), quote=False)}</code>"
    if kind == "url":
        url, label = match.group("url"), match.group("label")
        if not _SAFE_URL.match(url):  # javascript: and the like stay visible as text
            return html.escape(match.group(0), quote=False)
        return f'<a href="{html.escape(url)}">{_inline(label) or html.escape(url, quote=False)}</a>'
    if kind == "bolditalic":
        return f"<b><i>{_inline(match.group(kind))}</i></b>"
    tag = _WRAP[kind]  # type: ignore[index]
    return f"<{tag}>{_inline(match.group(kind))}</{tag}>"  # type: ignore[arg-type]
