"""Markdown cut into stretches that render alone as they do together, so a stream re-renders its tail.

A streamed answer is rendered again on every preview edit and measured again by the text
splitter; parsing it whole each time costs time in its length on every edit. Cut where a blank
line is followed by an unindented line outside a code fence, a CommonMark document splits into
blocks no later line can change: a blank line ends paragraphs, quotes and lazy continuations,
and an unindented line ends every list item (two halves of a loose list render alike, as list
markers are shown as written). Only link reference definitions reach across: a text with one
stays whole. The renderer caches each stretch, and an edit parses only what changed.

Only a top-level fence stays open across such a line; a fence in a list item ends with the item.
A fence line indented one to three spaces may be either, so both readings are followed, and a
cut needs none of them in a top-level fence.
"""

from __future__ import annotations

import itertools
import re

_FENCE = re.compile(r" {0,3}(`{3,}(?!.*`)|~{3,})")  # a backtick fence's info has no backtick


Reading = tuple[str, str, int]  # ("", "", 0) outside fences; ("top" | "item", fence, indent)
OUTSIDE: Reading = ("", "", 0)


def stretches(text: str) -> list[str]:
    """`text` (newlines normalized) as consecutive stretches, each with its line ends."""
    if re.search(r"^ {0,3}\[[^\]\n]+\]:", text, re.MULTILINE):  # a reference definition
        return [text]
    lines = text.split("\n")
    cuts = [0]
    readings = {OUTSIDE}
    for index, line in enumerate(lines):
        after_blank = index > 0 and not lines[index - 1].strip()
        # An unindented line ends every list item, and a fence in one: only "top" holds on.
        in_fence = any(kind == "top" for kind, _, _ in readings)
        if after_blank and line[:1] not in ("", " ", "\t") and not in_fence:
            cuts.append(index)
        readings = {after for reading in readings for after in _after(reading, line)}
    cuts.append(len(lines))
    # Each keeps its line ends: a code block left open in a list item holds the blank lines.
    parts = ["\n".join(lines[start:end]) + "\n" for start, end in itertools.pairwise(cuts)]
    parts[-1] = parts[-1][:-1]
    return parts


def _after(reading: Reading, line: str) -> tuple[Reading, ...]:
    """Where `line` leaves a reading; more than one where it reads two ways."""
    kind, fence, indent = reading
    expanded = line.expandtabs(4)
    at = len(expanded) - len(expanded.lstrip())
    if kind == "top":
        return (OUTSIDE,) if _closes(line, fence) else (reading,)
    if kind == "item" and line.strip():
        if at == 0:  # the item ends, and its fence with it
            return _after(OUTSIDE, line)
        if at < indent:  # less indented than the fence: maybe the item ends here
            closed = (OUTSIDE,) if _closes(line, fence) else (reading,)
            return closed + _after(OUTSIDE, line)
        return (OUTSIDE,) if _closes(line, fence) else (reading,)
    if kind == "item":
        return (reading,)
    opened = _FENCE.match(line)
    if not opened:
        return (OUTSIDE,)
    if at:  # at the top level, or in a list item
        return (("top", opened.group(1), 0), ("item", opened.group(1), at))
    return (("top", opened.group(1), 0),)


def _closes(line: str, fence: str) -> bool:
    """Whether `line` closes the top-level `fence`, as CommonMark reads a closing fence."""
    body = line.lstrip(" ")
    if len(line) - len(body) > 3:
        return False
    body = body.rstrip(" \t")
    return len(body) >= len(fence) and body == fence[0] * len(body)
