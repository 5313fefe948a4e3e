"""An album in, one message to the gateway: Telegram sends each photo or file of an album (up to
ten sent together) as an update of its own, sharing a `media_group_id`, the caption usually on
the first. Handed on one by one they were one turn and one answer per photo, and the answers to
"which of these is sharper?" could not see the others.

The items of an album are gathered until none came for `quiet_s` (or `most_s` after the first),
then handed to the inbox as one message: the first item's ids, every item's attachments in
message order, the captions joined. Nothing is acknowledged to Telegram before the album is
taken: a webhook request waits for it (a `TryLater` answers every item's request 503, and
Telegram sends them all again), and the polling loop holds its offset at the album's first update
until then (`first_pending`), so a process killed meanwhile leaves the album to be fetched
again, not lost.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field, replace
from typing import Final

from adapters.base import InboundMessage, Inbox, TryLater

log = logging.getLogger(__name__)

QUIET_S: Final = 0.8  # Telegram sends an album's items within a few hundred ms of each other
MOST_S: Final = 3.0  # an album is handed on this long after its first item, whatever follows
RETRY_S: Final = 1.0  # the inbox could not take it (Redis is down): offered again after this


@dataclass
class _Album:
    inbox: Inbox
    items: dict[int, InboundMessage] = field(default_factory=dict)  # update id -> item
    waited: bool = False  # a webhook request waits for it: a TryLater is answered 503
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    taken: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class Albums:
    """The albums being gathered, by chat and `media_group_id`."""

    def __init__(self, *, quiet_s: float = QUIET_S, most_s: float = MOST_S) -> None:
        self.quiet_s = quiet_s
        self.most_s = most_s
        self._open: dict[tuple[str, str], _Album] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def add(
        self, group: str, update_id: int, item: InboundMessage, inbox: Inbox, *, wait: bool
    ) -> None:
        """Gather `item` into its album. `wait`: return once the album was taken (raising the
        inbox's `TryLater`), as a webhook must; else at once (the polling loop holds its offset
        by `first_pending` instead)."""
        key = (item.chat.key, group)
        album = self._open.get(key)
        if album is None:
            album = self._open[key] = _Album(inbox)
            task = asyncio.create_task(self._gather(key, album), name=f"telegram-album:{group}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        if update_id not in album.items:  # a redelivered item is the same item
            album.items[update_id] = item
            album.arrived.set()
        if wait:
            album.waited = True
            await asyncio.shield(album.taken)

    def first_pending(self) -> int | None:
        """The lowest update id of an album not taken yet: Telegram must send it again if the
        process dies now."""
        ids = [min(album.items) for album in self._open.values() if album.items]
        return min(ids, default=None)

    def pending(self, update_id: int) -> bool:
        return any(update_id in album.items for album in self._open.values())

    async def settled(self, timeout: float) -> None:
        """Until no album is open, or `timeout`."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _gather(self, key: tuple[str, str], album: _Album) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.most_s
        try:
            while True:
                album.arrived.clear()
                left = deadline - loop.time()
                if left <= 0:
                    break
                try:
                    await asyncio.wait_for(album.arrived.wait(), min(self.quiet_s, left))
                except TimeoutError:
                    break  # none came for quiet_s
            await self._hand_on(key, album)
        finally:
            self._open.pop(key, None)
            if not album.taken.done():
                album.taken.cancel()

    async def _hand_on(self, key: tuple[str, str], album: _Album) -> None:
        while True:
            message = merged(list(album.items.values()))
            try:
                await album.inbox(message)
            except TryLater as exc:
                if album.waited:  # the webhook's requests answer 503: Telegram sends it again
                    album.taken.set_exception(exc)
                    return
                log.warning("Telegram album %s not taken (%s); retrying", key[1], exc)
                await asyncio.sleep(RETRY_S)
                continue
            except Exception:
                log.exception("handing on Telegram album %s failed", key[1])
            if not album.taken.done():
                album.taken.set_result(None)
            return


def merged(items: list[InboundMessage]) -> InboundMessage:
    """One message of an album's items, in the order they were sent."""
    items = sorted(items, key=_sent_order)
    first = items[0]
    return replace(
        first,
        text="\n".join(item.text for item in items if item.text),
        attachments=tuple(a for item in items for a in item.attachments),
        mentioned=any(item.mentioned for item in items),
    )


def _sent_order(item: InboundMessage) -> int:
    return int(item.message_id) if item.message_id and item.message_id.isdigit() else 0
