"""`||hidden||` for markdown-it: spoiler_open / spoiler_close around the text, as ~~ does for s."""

from __future__ import annotations

from markdown_it import MarkdownIt
from markdown_it.rules_inline.state_inline import Delimiter, StateInline

_PIPE = 0x7C


def spoilers(parser: MarkdownIt) -> None:
    """The plugin: `parser.use(spoilers)`."""
    parser.inline.add_terminator_char("|")  # else the text rule swallows `|` mid-line
    parser.inline.ruler.before("emphasis", "spoiler", _spoiler_tokenize)
    parser.inline.ruler2.after("strikethrough", "spoiler", _spoiler_pairs)


def _spoiler_tokenize(state: StateInline, silent: bool) -> bool:
    """`||` becomes a delimiter that `_spoiler_pairs` turns into spoiler tokens once paired."""
    if silent or state.src[state.pos] != "|":
        return False
    scanned = state.scanDelims(state.pos, True)
    token = state.push("text", "", 0)
    token.content = "|" * scanned.length
    if scanned.length == 2:  # a lone `|` or a longer run stays text
        state.delimiters.append(
            Delimiter(_PIPE, 0, len(state.tokens) - 1, -1, scanned.can_open, scanned.can_close)
        )
    state.pos += scanned.length
    return True


def _spoiler_pairs(state: StateInline) -> None:
    """Turn the `||` pairs that balance_pairs matched into spoiler_open / spoiler_close."""
    nested = (meta["delimiters"] for meta in state.tokens_meta if meta and "delimiters" in meta)
    for delimiters in (state.delimiters, *nested):
        for opener in delimiters:
            if opener.marker != _PIPE or opener.end == -1:
                continue
            closer = delimiters[opener.end]
            for index, nesting in ((opener.token, 1), (closer.token, -1)):
                token = state.tokens[index]
                token.type = "spoiler_open" if nesting == 1 else "spoiler_close"
                token.tag, token.nesting, token.markup, token.content = "span", nesting, "||", ""
