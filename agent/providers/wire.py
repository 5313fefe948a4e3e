"""Request bodies assembled from JSON pieces encoded once, so a history is not re-encoded per call.

A model call sends the whole history again. The vendor modules encode each message to its wire
JSON the first time it is sent and keep the bytes on the message (`Message.derived`); a request
body is then the few fields that change per call, encoded now, joined with those pieces. Joining
is a copy of the bytes: 1,000 messages cost ~0.3 ms, where encoding them every call cost ~3 ms
and the SDKs' own request transform (openai) ~300 ms.

Even looking each piece up costs a Python step per message, ~5 % of a call's CPU at 800
messages (py-spy, bench/ws_bench.py). A conversation's next request starts with the same
messages as its last one, so what a request made of its history is kept on the newest message
(`Prefix`, `resume`, `keep`) and the next request walks only the messages after it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from agent.types import Message

T = TypeVar("T")

# the same form the SDKs send (httpx's defaults): compact, UTF-8 as is, no NaN
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dumps(value: Any) -> bytes:
    return _ENCODER.encode(value).encode()


class LastEncoded:
    """`dumps(wrap(text))`, kept for the next call with the same text: a persona's system prompt
    (kilobytes, the same on every call of a persona version) is encoded once, not per call."""

    __slots__ = ("_encoded", "_text", "_wrap")

    def __init__(self, wrap: Callable[[str], Any] = lambda text: text) -> None:
        self._wrap = wrap
        self._text: str | None = None
        self._encoded = b""

    def __call__(self, text: str) -> bytes:
        if text != self._text:  # the same object as a rule: `is`, then no compare at all
            self._text, self._encoded = text, dumps(self._wrap(text))
        return self._encoded


def cached(message: Message, key: str, derive: Callable[[Message], T]) -> T:
    """What `derive` makes of the message, kept on it under `key`: computed on first use only."""
    try:
        value: T = message.derived[key]
    except KeyError:
        value = message.derived[key] = derive(message)
    return value


def json_object(
    fields: dict[str, Any],
    encoded: dict[str, bytes] | None = None,
    arrays: dict[str, Sequence[bytes]] | None = None,
) -> bytes:
    """One JSON object: `fields` encoded now, `encoded` values spliced in as they are, and each of
    `arrays` a JSON array of its items, encoded already and none of them empty.

    A history's bytes are copied twice on their way into the body (joined, then into it), not
    five times as joining each value on its own and adding brackets and keys to it did: at
    2,000 messages that, and a scan of the pieces for empty ones, was ~60 us of a call."""
    head = dumps(fields)[:-1]  # without its closing brace
    parts = [head]
    comma = b"," if len(head) > 1 else b""
    for key, value in (encoded or {}).items():
        parts += (comma, dumps(key), b":", value)
        comma = b","
    for key, items in (arrays or {}).items():
        parts += (comma, dumps(key), b":[", b",".join(items), b"]")
        comma = b","
    parts.append(b"}")
    return b"".join(parts)


def extended(joined: bytes, added: Sequence[bytes]) -> bytes:
    """Encoded items joined with commas (`joined`, maybe none) and `added` after them, none empty.

    What a request keeps of its history for the next one is its items joined so, not a tuple of
    them: the next request copies the bytes once, where joining 2,000 items again cost a step
    per item (~150 instructions each, 0.3 M a call; bench/provider_bench.py --instructions)."""
    if not added:
        return joined
    return b",".join([joined, *added]) if joined else b",".join(added)


LOOK_BACK = 64  # messages added since the last request (a turn adds a few)


@dataclass(frozen=True, slots=True)
class Prefix(Generic[T]):
    """What a request made of its history's first `count` messages (`made`), kept on the newest."""

    first: Message  # the history's first message: a window that moved on starts afresh
    count: int
    made: T


def resume(messages: Sequence[Message], key: str) -> Prefix[Any] | None:
    """What the last request of this history kept under `key`, if it is a prefix of this one."""
    for index in range(len(messages) - 1, max(-1, len(messages) - 1 - LOOK_BACK), -1):
        prefix: Prefix[Any] | None = messages[index].derived.get(key)
        if prefix is not None:
            if prefix.first is messages[0] and prefix.count == index + 1:
                return prefix
            break
    return None


def keep(messages: Sequence[Message], key: str, start: int, made: object) -> None:
    """Keep `made`, what this request made of all of `messages`, on the newest of them; the
    prefix it continued from (`start` messages) goes: one is kept per conversation."""
    if not messages:
        return
    if 0 < start < len(messages):
        messages[start - 1].derived.pop(key, None)
    messages[-1].derived[key] = Prefix(messages[0], len(messages), made)
