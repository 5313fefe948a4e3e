"""A bounded memory of recent keys: the least recently written is forgotten first."""

from __future__ import annotations

from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Recent(Generic[K, V]):
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._items: dict[K, V] = {}  # insertion order is write order

    def __contains__(self, key: K) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: K) -> V | None:
        return self._items.get(key)

    def put(self, key: K, value: V) -> None:
        self._items.pop(key, None)
        self._items[key] = value
        if len(self._items) > self.limit:
            del self._items[next(iter(self._items))]

    def discard(self, key: K) -> None:
        self._items.pop(key, None)
