"""One markdown parse for every channel, and the base each channel's renderer maps it from.

The model writes markdown once; each channel shows it in its own markup. `parse` reads it with
markdown-it-py (CommonMark, plus ~~strikethrough~~, tables and ||spoilers||; raw HTML is off, so
model-written tags arrive as text for the channel to escape). `Renderer` walks the tree: it owns
the structure (block order, blank lines, list markers and indentation, table cells) and calls one
small method per construct, given the text already rendered inside it. Its defaults produce the
plain visible text, so a channel overrides only what it can format, and its output without the
tags is always the plain rendering: lengths can be measured on that.

A new channel is one module of about 100 lines: subclass `Renderer`, override `text` to escape
what its markup treats as special, then the spans and blocks it supports. For example
Slack mrkdwn: `text` escapes `& < >`, `strong` is `*x*`, `em` `_x_`, `strike` `~x~`, `code_inline`
`` `x` ``, `code_block` a ``` fence, `link` `<url|label>`, `heading` a bold line, `blockquote`
each line prefixed with `> `, and `table` the default grid inside a fence.
Feishu card markdown: `strong` `**x**`, `em` `*x*`, `strike` `~~x~~`, `link` `[x](url)`,
`code_block` a fence with its language, `heading` a bold line. Spoilers, which neither has,
stay plain text by default.

`render` parses stretch by stretch (see markdown_parts) and keeps those a stream has finished:
an edit of a streamed answer parses only its tail.

Rendering never makes the visible text longer than the markdown, except that tables are padded
into a grid: `may_lengthen` says when a measure must render rather than trust the written length.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

from adapters.markdown_parts import stretches
from adapters.markdown_spoiler import spoilers

_LANGUAGE = re.compile(r"[\w+#.-]+")
_NEWLINES = re.compile(r"\r\n?")
# Enough for the stretches of every answer streaming at once; most are a paragraph long.
CACHED_STRETCHES = 2048


PARSER = MarkdownIt("commonmark", {"html": False}).enable(["strikethrough", "table"]).use(spoilers)


def parse(markdown: str) -> SyntaxTreeNode:
    """The markdown's syntax tree; any text parses (half-written markup stays text)."""
    return SyntaxTreeNode(PARSER.parse(markdown))


def may_lengthen(markdown: str) -> bool:
    """Whether the rendered visible text can be longer than `markdown` (only a table can)."""
    return "|" in markdown


class Renderer:
    """Walks the parsed tree; subclasses map each construct to their markup."""

    # --- the mapping: each gets its content already rendered, and returns it in the markup ----

    def text(self, text: str) -> str:
        """Literal text: escape what the markup would read as markup."""
        return text

    def strong(self, inner: str) -> str:
        return inner

    def em(self, inner: str) -> str:
        return inner

    def strike(self, inner: str) -> str:
        return inner

    def spoiler(self, inner: str) -> str:
        return inner

    def code_inline(self, code: str) -> str:
        return self.text(code)

    def code_block(self, code: str, language: str) -> str:
        """`code` is raw (unescaped); `language` is a bare word or ""."""
        return self.text(code)

    def link(self, inner: str, url: str) -> str:
        """`url` is as markdown-it normalized it; `inner` is never empty (the URL stands in)."""
        return inner

    def heading(self, inner: str, level: int) -> str:
        return inner

    def blockquote(self, inner: str) -> str:
        return inner

    def rule(self) -> str:
        return self.text("───")  # no longer than the shortest markdown rule

    def table(self, rows: list[list[str]]) -> str:
        """`rows` are plain cell texts, the header first."""
        return self.text(grid(rows))

    # --- the walk -----------------------------------------------------------------------------

    def __init__(self) -> None:
        self._rendered: dict[str, str] = {}  # stretch -> its rendering, oldest first

    def render(self, markdown: str) -> str:
        parts = stretches(_NEWLINES.sub("\n", markdown))
        last = len(parts) - 1
        rendered = (self._stretch(part, index < last) for index, part in enumerate(parts))
        return "\n\n".join(part for part in rendered if part)  # a blank line was between them

    def _stretch(self, markdown: str, done: bool) -> str:
        """A stretch's rendering; one that more text follows is final, and kept for next time."""
        rendered = self._rendered.get(markdown)
        if rendered is None:
            rendered = self._blocks(parse(markdown).children, markdown.split("\n"), "")
            if done:  # the last stretch of a stream grows: it would never be asked for again
                if len(self._rendered) >= CACHED_STRETCHES:
                    del self._rendered[next(iter(self._rendered))]
                self._rendered[markdown] = rendered
        return rendered

    def _blocks(self, nodes: Sequence[SyntaxTreeNode], lines: list[str], indent: str) -> str:
        out: list[str] = []
        gap = ""
        for node in nodes:
            gap = max(gap, _gap(node, lines), key=len)  # an empty block keeps its blank line
            block = self._block(node, lines, indent)
            if block:  # an empty fence or quote leaves no line behind
                out.extend((gap, block) if out else (block,))
                gap = ""
        return "".join(out)

    def _block(self, node: SyntaxTreeNode, lines: list[str], indent: str) -> str:
        kind = node.type
        if kind in ("bullet_list", "ordered_list"):
            return self._list(node, lines, indent)
        if kind == "blockquote":
            # A quote's lines need no list indentation: the channel marks them as quoted.
            body = self.blockquote(self._blocks(node.children, lines, ""))
        elif kind == "paragraph":
            body = self._inline(node.children[0])
        elif kind == "heading":
            body = self.heading(self._inline(node.children[0]), int(node.tag[1:]))
        elif kind in ("fence", "code_block"):
            code = node.content.removesuffix("\n")
            body = self.code_block(code, _language(node.info)) if code else ""
        elif kind == "hr":
            body = self.rule()
        elif kind == "table":
            body = self.table(_cells(node))
        else:  # html_block is off; a construct a later plugin adds shows as its text
            body = self.text(node.content)
        return indent + body if body else ""

    def _list(self, node: SyntaxTreeNode, lines: list[str], indent: str) -> str:
        out: list[str] = []
        for item in node.children:
            # The number as written, not recounted: rendering never lengthens the text.
            marker = "• " if node.type == "bullet_list" else f"{item.info}{item.markup} "
            inner = indent + " " * len(marker)
            body = self._blocks(item.children, lines, inner)
            if out:
                out.append(_gap(item, lines))
            # An empty item ("-" alone) is its marker alone: "• " would be longer than "-".
            body = body.removeprefix(inner) if body else ""
            out.append(indent + self.text(marker if body else marker.rstrip()) + body)
        return "".join(out)

    def _inline(self, node: SyntaxTreeNode) -> str:
        return "".join(self._span(child) for child in node.children)

    def _span(self, node: SyntaxTreeNode) -> str:
        kind = node.type
        if kind == "text":
            return self.text(node.content)
        if kind in ("softbreak", "hardbreak"):
            return "\n"
        if kind == "code_inline":
            return self.code_inline(node.content)
        if kind == "strong":
            return self.strong(self._inline(node))
        if kind == "em":
            return self.em(self._inline(node))
        if kind == "s":
            return self.strike(self._inline(node))
        if kind == "spoiler":
            return self.spoiler(self._inline(node))
        if kind == "link":
            url = str(node.attrs["href"])
            return self.link(self._inline(node) or self.text(url), url)
        if kind == "image":  # a chat message cannot inline an image: it shows as its link
            url = str(node.attrs["src"])
            return self.link(self.text(_plain(node) or url), url)
        return self.text(node.content)


def grid(rows: list[list[str]]) -> str:
    """Cells padded into columns for a monospace font, a rule under the header row."""
    widths = [max(_width(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = [
        " | ".join(
            cell + " " * (width - _width(cell)) for cell, width in zip(row, widths, strict=True)
        )
        for row in rows
    ]
    lines.insert(1, "-+-".join("-" * width for width in widths))
    return "\n".join(line.rstrip() for line in lines)


def _width(text: str) -> int:
    """Columns in a monospace font: East Asian wide characters take two, combining marks none."""
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
        for c in text
    )


def _gap(node: SyntaxTreeNode, lines: list[str]) -> str:
    """A blank line before `node` if the markdown had one (a lone `>` is a quote's blank line)."""
    start = node.map[0] if node.map else 0
    return "\n\n" if start > 0 and not lines[start - 1].strip(" \t>") else "\n"


def _language(info: str) -> str:
    word = info.split(maxsplit=1)[0] if info.strip() else ""
    return word if _LANGUAGE.fullmatch(word) else ""


def _cells(table: SyntaxTreeNode) -> list[list[str]]:
    return [
        [_plain(cell) for cell in row.children]
        for section in table.children
        for row in section.children
    ]


def _plain(node: SyntaxTreeNode) -> str:
    """The visible text under `node`, for places that hold no markup (table cells, image alt)."""
    if node.type in ("text", "code_inline"):
        return node.content
    if node.type in ("softbreak", "hardbreak"):
        return " "
    text = "".join(_plain(child) for child in node.children)
    if node.type == "link" and not text:
        return str(node.attrs["href"])
    return text
