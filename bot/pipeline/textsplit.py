"""Split text that is too long for one message: at paragraph, line or word ends, not inside code."""

from __future__ import annotations

from collections.abc import Callable

FENCE = "```"


def split_text(text: str, limit: int, measure: Callable[[str], int] = len) -> list[str]:
    """Chunks each within `limit` as `measure` counts it; nothing is dropped but edge whitespace."""
    chunks: list[str] = []
    rest = text
    while measure(rest) > limit:
        head, rest = _cut(rest, limit, measure)
        chunks.append(head)
    chunks.append(rest)
    return chunks


def _cut(text: str, limit: int, measure: Callable[[str], int]) -> tuple[str, str]:
    hard = _longest_prefix(text, limit - len(FENCE) - 1, measure)
    while True:
        cut = _best_cut(text, hard)
        head, rest = text[:cut].rstrip(), text[cut:].lstrip("\n")
        if head.count(FENCE) % 2:  # forced to cut inside a code block: close it, reopen it
            head += "\n" + FENCE
            rest = FENCE + "\n" + rest
        # A measure of rendered text need not grow with the text: cutting a link or a bold
        # span open shows its markup. Then cut earlier.
        if cut <= 1 or measure(head) <= limit:
            return head, rest
        hard = cut - 1


def _longest_prefix(text: str, limit: int, measure: Callable[[str], int]) -> int:
    """The largest n with measure(text[:n]) <= limit (measure grows with n)."""
    if measure is len:
        return max(1, limit)
    low, high = 1, min(len(text), limit)
    while low < high:
        middle = (low + high + 1) // 2
        if measure(text[:middle]) <= limit:
            low = middle
        else:
            high = middle - 1
    return max(1, low)


def _best_cut(text: str, hard: int) -> int:
    window = text[:hard]
    floor = hard // 2
    fence_at = _open_fence(window)
    if fence_at is not None and fence_at > hard // 4:
        return fence_at  # the code block starts the next message instead of being cut
    for separator in ("\n\n", "\n", " "):
        position = window.rfind(separator)
        if position > floor:
            return position + len(separator)
    return hard


def _open_fence(window: str) -> int | None:
    """Where an unclosed code fence starts in `window`, if one is open at its end."""
    if window.count(FENCE) % 2 == 0:
        return None
    return window.rfind(FENCE)


def utf16_length(text: str) -> int:
    """Length in UTF-16 code units, as Telegram and JavaScript count."""
    return len(text.encode("utf-16-le")) // 2
