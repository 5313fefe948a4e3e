"""The model's markdown as Slack mrkdwn in `text`, its length as Slack counts it, hints as Block Kit.

Why mrkdwn in `text` rather than `markdown_text` (standard markdown, which Slack renders itself):
we know exactly what Slack receives, so we can escape it (`&`, `<`, `>` are Slack's only
escapes, and a model's `<!channel>` must never ping a whole channel), measure it and split it
before Slack's limit; `text` may travel beside Block Kit blocks (buttons, cards), which
`markdown_text` may not; and a half-streamed preview renders cleanly because every span is
written from the parsed tree, closed where it opens.

Native streams (stream.py) take standard markdown (`markdown_text`), which Slack renders itself:
the model's text goes as it is, but for `<!`, `<@` and `<#`, which are kept from reaching Slack
as a mention (`safe_markdown`).

Length: Slack's `text` limit is documented as 40,000 characters but updates are refused with
`msg_too_long` near 4,000 *bytes* of text (CJK is three bytes a character), so the measure is
the UTF-8 size of the rendered, escaped text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from adapters.markdown import Renderer, grid, may_lengthen

_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_SAFE_URL = re.compile(r"(https?://|mailto:)[^\s<>|]+", re.IGNORECASE)
SECTION_CHARS = 3000  # a section block's text
FIELD_CHARS = 2000  # each of a section's fields
MAX_BLOCKS = 50


class SlackMrkdwn(Renderer):
    def text(self, text: str) -> str:
        return text.translate(_ESCAPES)

    def strong(self, inner: str) -> str:
        return f"*{inner}*" if inner else ""

    def em(self, inner: str) -> str:
        return f"_{inner}_" if inner else ""

    def strike(self, inner: str) -> str:
        return f"~{inner}~" if inner else ""

    def code_inline(self, code: str) -> str:
        return f"`{self.text(code)}`" if code else ""

    def code_block(self, code: str, language: str) -> str:
        return f"```\n{self.text(code)}\n```"

    def link(self, inner: str, url: str) -> str:
        if not _SAFE_URL.fullmatch(url):  # relative, javascript:, data: ... go nowhere
            return inner
        label = inner.replace("|", "¦")  # `|` ends Slack's url part; `>` is already escaped
        return f"<{url.replace('&', '&amp;')}|{label}>"

    def heading(self, inner: str, level: int) -> str:
        return self.strong(inner)

    def blockquote(self, inner: str) -> str:
        return "\n".join("> " + line if line else ">" for line in inner.split("\n"))

    def table(self, rows: list[list[str]]) -> str:
        return self.code_block(grid(rows), "")


_MRKDWN = SlackMrkdwn()


def to_mrkdwn(markdown: str) -> str:
    return _MRKDWN.render(markdown)


def mrkdwn_bytes(markdown: str, *, limit: int | None = None) -> int:
    """UTF-8 bytes of the rendered text. Rendering shortens text except where it escapes
    `& < >` or pads a table, so plain text is measured without rendering (the hot path)."""
    written = len(markdown.encode())
    plain = not may_lengthen(markdown) and not any(c in markdown for c in "&<>")
    if limit is not None and written <= limit and plain:
        return written
    return len(to_mrkdwn(markdown).encode())


_MENTION = re.compile(r"<([!@#])")


def safe_markdown(markdown: str) -> str:
    """Markdown for a stream, no `<!channel>`, `<@U…>` or `<#C…>` in it: a word joiner after
    the `<` keeps the text as it reads and Slack from pinging anyone."""
    return _MENTION.sub("<\u2060\\1", markdown)


def hint_blocks(hints: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The display hints alone as Block Kit (a stream's text is its own)."""
    made = [block for number, hint in enumerate(hints) for block in _hint(hint, number)]
    return made[:MAX_BLOCKS]


def blocks(text: str, hints: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The answer as section blocks, then each display hint as Block Kit."""
    made = [_section(part) for part in _by_lines(text, SECTION_CHARS)]
    for number, hint in enumerate(hints):
        made.extend(_hint(hint, number))
    return made[:MAX_BLOCKS]


def _by_lines(text: str, limit: int) -> list[str]:
    """`text` in parts of at most `limit` characters, cut at line ends where it can be."""
    parts: list[str] = []
    current = ""
    for line in text.split("\n"):
        for piece in [line[i : i + limit] for i in range(0, len(line), limit)] or [""]:
            joined = f"{current}\n{piece}" if current else piece
            if len(joined) > limit:
                parts.append(current)
                joined = piece
            current = joined
    return [*parts, current]


def _section(mrkdwn: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": mrkdwn or " "}}


def _plain(text: Any, limit: int = 75) -> dict[str, Any]:
    return {"type": "plain_text", "text": str(text)[:limit] or " ", "emoji": True}


def _hint(hint: Mapping[str, Any], number: int) -> list[dict[str, Any]]:
    kind = hint.get("type")
    made: list[dict[str, Any]] = []
    if kind == "card":
        made.append({"type": "header", "text": _plain(hint.get("title", ""), 150)})
        if hint.get("subtitle"):
            made.append({"type": "context", "elements": [_mrkdwn(_esc(hint["subtitle"]))]})
        fields = [
            _mrkdwn(f"*{_esc(f.get('label', ''))}*\n{_esc(f.get('value', ''))}", FIELD_CHARS)
            for f in hint.get("fields", [])
        ]
        for start in range(0, len(fields), 10):  # a section holds at most 10 fields
            made.append({"type": "section", "fields": fields[start : start + 10]})
    elif kind == "confirm":
        made.append(_section(_esc(hint.get("text", ""))))
    elif kind == "alert":
        icon = {"success": "✅", "warning": "⚠️", "error": "❌"}.get(hint.get("level", ""), "ℹ️")
        title = f"*{_esc(hint['title'])}* " if hint.get("title") else ""
        made.append(
            {
                "type": "context",
                "elements": [_mrkdwn(f"{icon} {title}{_esc(hint.get('text', ''))}")],
            }
        )
    buttons = [_button(b) for b in hint.get("buttons", [])][:25]
    if buttons:
        made.append({"type": "actions", "block_id": f"hint-{number}", "elements": buttons})
    return made


def _button(button: Mapping[str, Any]) -> dict[str, Any]:
    made: dict[str, Any] = {
        "type": "button",
        "text": _plain(button.get("label", "")),
        "action_id": str(button.get("action_id", ""))[:255],
    }
    if "value" in button:
        made["value"] = str(button["value"])[:2000]
    if button.get("style") in ("primary", "danger"):  # Slack has no "secondary": the default
        made["style"] = button["style"]
    return made


def _mrkdwn(text: str, limit: int = SECTION_CHARS) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": text[:limit]}


def _esc(value: Any) -> str:
    return str(value).translate(_ESCAPES)
