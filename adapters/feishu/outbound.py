"""What the channel calls: messages and CardKit cards, each call inside its `RateBudget` slot.

Scopes (adapters/budget/base.py): a new message takes the chat's slot (5 a second per chat), an
update of a streaming card the card's slot (one request in flight per card, spaced by
`card_update_interval_s`), an edit of a text message the message's slot; all count against the
app-wide rate. A 429 pauses the scope that drew it. Previews never wait (`Busy` becomes
`RateLimited`, and the delivery tries again later with newer text); finals and sends queue.
CardKit wants a strictly increasing `sequence` per card: it is taken inside the card's slot, so
requests leave in sequence order, and it is seeded from the clock, so a card a restarted process
finishes still gets a higher one.

Feishu closes a card's streaming mode 10 minutes after it was last turned on [doc, and the
`200850 card streaming timeout` / `300309 streaming mode is closed` answers third parties
report]; a closed stream refuses element content writes. So a write to a card whose stream
opened `stream_renew_s` ago (8 minutes) first turns streaming on again (the settings call),
and a write refused as closed turns it on and is sent once more: a long turn keeps its card.
Whole-card updates work whether or not the card streams.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from adapters.base import RateLimited
from adapters.budget import Busy, Rank, Rate, RateBudget
from adapters.feishu.api import STALE_SEQUENCE, STREAM_CLOSED, ApiError, FeishuApi
from adapters.feishu.sdk import HttpMethod

APP_PER_SECOND = 40.0  # under the Open API's usual 50 a second per app [doc], bursts included
APP_BURST = 10  # so no second ever sees more than 40 + 10 calls
CHAT_INTERVAL_S = 0.2  # 5 messages a second to one chat [doc]
# CardKit's own limit per card: 10 operations a second [doc]. Every card slot keeps at least
# this gap, whatever `card_update_interval_s` says, so one slot's pair of calls (a stream turned
# on again, then the write) cannot take a second past ten either.
CARD_GAP_S = 0.15
STREAM_RENEW_S = 480.0  # streaming is turned on again this long after it was; Feishu: 600 s
_EPOCH_DS = 17_670_000_000  # 2026-01-01 in tenths of a second: sequences stay under 2**31


def clock_sequence() -> int:
    return int(time.time() * 10) - _EPOCH_DS


class Outbound:
    def __init__(
        self,
        api: FeishuApi,
        budget: RateBudget,
        *,
        card_interval_s: float,
        edit_interval_s: float,
    ) -> None:
        self.api = api
        self._budget = budget
        self._prefix = f"feishu:{api.app_id}"
        self._rates = (Rate(self._prefix, APP_PER_SECOND, burst=APP_BURST),)
        self._card_interval_s = card_interval_s
        self._edit_interval_s = edit_interval_s
        self._sequences: dict[str, int] = {}  # card_id -> the last sequence used
        self._opened: dict[str, float] = {}  # card_id -> when its streaming was last turned on
        self.stream_renew_s = STREAM_RENEW_S
        self.card_updates = 0
        self.renewals = 0  # streams turned on again (for the benchmark and tests)

    # --- messages -----------------------------------------------------------------------------

    async def post(
        self,
        chat_id: str,
        msg_type: str,
        content: str,
        *,
        reply_to: str | None,
        rank: Rank,
        in_thread: bool = False,
    ) -> str:
        """A new message (a reply when `reply_to`, in its thread when `in_thread`); its `uuid`
        makes a retry land once."""
        body: dict[str, Any] = {"msg_type": msg_type, "content": content, "uuid": str(uuid.uuid4())}
        if reply_to and in_thread:
            body["reply_in_thread"] = True
        async with self._slot(f"chat:{chat_id}", rank, CHAT_INTERVAL_S):
            if reply_to:
                data = await self.api.call(
                    HttpMethod.POST,
                    "/open-apis/im/v1/messages/:message_id/reply",
                    body,
                    paths={"message_id": reply_to},
                    what="reply",
                    sending=True,
                )
            else:
                data = await self.api.call(
                    HttpMethod.POST,
                    "/open-apis/im/v1/messages",
                    {**body, "receive_id": chat_id},
                    query=(("receive_id_type", "chat_id"),),
                    what="message",
                    sending=True,
                )
        return str(data.get("message_id", ""))

    async def edit_post(self, message_id: str, content: str, rank: Rank) -> None:
        """`PUT` a text or post message: at most 20 times in its life (the caller counts)."""
        async with self._slot(f"message:{message_id}", rank, self._edit_interval_s):
            await self.api.call(
                HttpMethod.PUT,
                "/open-apis/im/v1/messages/:message_id",
                {"msg_type": "post", "content": content},
                paths={"message_id": message_id},
                what="message edit",
            )

    async def patch_card_message(self, message_id: str, card: str, rank: Rank) -> None:
        """Replace a card sent inline (not a CardKit entity): 5 a second per message."""
        async with self._slot(f"message:{message_id}", rank, 0.2):
            await self.api.call(
                HttpMethod.PATCH,
                "/open-apis/im/v1/messages/:message_id",
                {"content": card},
                paths={"message_id": message_id},
                what="card update",
            )

    # --- CardKit ------------------------------------------------------------------------------

    async def create_card(self, card: str) -> str:
        async with self._slot("cards", "send", 0.0):
            data = await self.api.call(
                HttpMethod.POST,
                "/open-apis/cardkit/v1/cards",
                {"type": "card_json", "data": card},
                what="card create",
            )
        card_id = str(data["card_id"])
        self._opened[card_id] = time.monotonic()
        return card_id

    def stream_age(self, card_id: str) -> float:
        """Seconds since the card's streaming was last turned on (infinite: not known here)."""
        opened = self._opened.get(card_id)
        return float("inf") if opened is None else time.monotonic() - opened

    async def stream_text(self, card_id: str, element_id: str, content: str, rank: Rank) -> None:
        """The element's full text so far (CardKit animates the difference), streaming turned
        on again first when it is about to close, or when it has."""
        write = (
            HttpMethod.PUT,
            "/open-apis/cardkit/v1/cards/:card_id/elements/:element_id/content",
            {"content": content},
            {"card_id": card_id, "element_id": element_id},
        )
        async with self._slot(f"card:{card_id}", rank, self._card_gap(rank)):
            if self.stream_age(card_id) >= self.stream_renew_s:
                await self._open_stream(card_id)
            try:
                await self._sequenced(card_id, *write)
            except ApiError as exc:
                if exc.code not in STREAM_CLOSED:
                    raise
                await self._open_stream(card_id)
                await self._sequenced(card_id, *write)

    async def _open_stream(self, card_id: str) -> None:
        settings = json.dumps({"config": {"streaming_mode": True}})
        await self._sequenced(
            card_id,
            HttpMethod.PATCH,
            "/open-apis/cardkit/v1/cards/:card_id/settings",
            {"settings": settings},
            {"card_id": card_id},
        )
        self._opened[card_id] = time.monotonic()
        self.renewals += 1

    async def close_stream(self, card_id: str, summary: str) -> None:
        """Streaming mode off (the chat list stops saying "generating…"), with its summary."""
        config = {"streaming_mode": False, "summary": {"content": summary}}
        settings = json.dumps({"config": config}, ensure_ascii=False)
        await self._card_call(
            card_id,
            "final",
            HttpMethod.PATCH,
            "/open-apis/cardkit/v1/cards/:card_id/settings",
            {"settings": settings},
            {"card_id": card_id},
        )

    async def replace_card(self, card_id: str, card: str, rank: Rank = "final") -> None:
        """The whole card (structure and all): `PUT /cardkit/v1/cards/:card_id`."""
        await self._card_call(
            card_id,
            rank,
            HttpMethod.PUT,
            "/open-apis/cardkit/v1/cards/:card_id",
            {"card": {"type": "card_json", "data": card}},
            {"card_id": card_id},
        )

    async def _card_call(
        self,
        card_id: str,
        rank: Rank,
        method: HttpMethod,
        path: str,
        body: Mapping[str, Any],
        paths: Mapping[str, str],
    ) -> None:
        async with self._slot(f"card:{card_id}", rank, self._card_gap(rank)):
            await self._sequenced(card_id, method, path, body, paths)

    def _card_gap(self, rank: Rank) -> float:
        """The spacing after a final's calls is short (its card and the end of streaming
        follow each other), a preview's is `card_update_interval_s`; never under CARD_GAP_S."""
        interval = self._card_interval_s if rank == "preview" else CARD_GAP_S
        return max(interval, CARD_GAP_S)

    async def _sequenced(
        self,
        card_id: str,
        method: HttpMethod,
        path: str,
        body: Mapping[str, Any],
        paths: Mapping[str, str],
    ) -> None:
        """One card call with the card's next sequence (inside the card's slot)."""
        for attempt in (1, 2):
            sequence = max(self._sequences.get(card_id, 0) + 1, clock_sequence())
            self._sequences[card_id] = sequence
            try:
                await self.api.call(
                    method,
                    path,
                    {**body, "sequence": sequence, "uuid": str(uuid.uuid4())},
                    paths=paths,
                    what="card update",
                )
                self.card_updates += 1
                return
            except ApiError as exc:
                # Another process (or a lost answer) used a higher sequence: jump past it.
                if exc.code != STALE_SEQUENCE or attempt == 2:
                    raise
                self._sequences[card_id] = sequence + 1000

    def uploading(self, rank: Rank = "final") -> AbstractAsyncContextManager[None]:
        """An upload's place in the app's rate (its message then takes the chat's)."""
        return self._slot("upload", rank, 0.0)

    def forget_card(self, card_id: str) -> None:
        self._sequences.pop(card_id, None)
        self._opened.pop(card_id, None)

    @asynccontextmanager
    async def _slot(self, scope: str, rank: Rank, interval_s: float) -> AsyncIterator[None]:
        name = f"{self._prefix}:{scope}"
        try:
            async with self._budget.slot(name, rank, interval_s=interval_s, rates=self._rates):
                yield
        except Busy as exc:
            raise RateLimited(exc.retry_after, "Feishu budget in use") from None
        except RateLimited as exc:
            await self._budget.penalize(name, exc.retry_after)
            raise
