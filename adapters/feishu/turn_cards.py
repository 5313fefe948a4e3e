"""A turn's one CardKit card, from the placeholder to the final: what it shows, and how it changes.

A preview whose steps (the specialists' panels, the tools' lines) are what the card shows writes
only the answer element (`PUT …/elements/answer/content`, which CardKit animates); one whose
steps changed writes the whole card (`PUT /cardkit/v1/cards/:card_id`), streaming still on. The
final writes the whole card when its structure changes (the stop button goes, panels end,
display hints come), else the answer element, then turns streaming off with the chat list's
summary. Every call carries the card's next sequence (outbound.py).

The turn's card is the only card of the turn: a final the delivery could not land in it and
would post as a new message (`send(final=True)` with `content.live`) is written into the chat's
open card again, as a plain card with the answer alone when the whole card keeps being refused.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adapters.base import ChannelError, MessageHandle, OutboundContent, RateLimited
from adapters.feishu.cards import ANSWER
from adapters.feishu.live_card import language_of, live_card, shown_text, steps_of
from adapters.feishu.outbound import Outbound
from adapters.feishu.render import plain_text, rendered_length
from adapters.live import Step
from adapters.telegram.recent import Recent

log = logging.getLogger(__name__)

REMEMBERED = 4096  # cards whose shown state is kept


@dataclass
class TurnCard:
    card_id: str
    chat_key: str
    stop: Mapping[str, str] | None  # the stop button's callback value while it shows
    markdown: str  # the answer element as shown
    steps: tuple[Step, ...] = ()  # the steps as the panels and lines show them
    known: bool = True  # False: a card of an earlier process, whose state is not known
    part: bool = False  # a later part of an answer too long for one card: the text alone
    summary: str = ""  # the chat list's line, once the card ended


class TurnCards:
    def __init__(self, out: Outbound, limit: int) -> None:
        self.out = out
        self.limit = limit  # the answer element's most bytes (card markdown, JSON-encoded)
        self._cards: Recent[str, TurnCard] = Recent(REMEMBERED)  # message id -> its card
        self._open: dict[str, list[MessageHandle]] = {}  # chat key -> its cards not ended
        # chat key -> a turn card whose final was the first part of a long answer: its panels
        # end when the last part (which carries the turn's live state) is out
        self._settling: dict[str, TurnCard] = {}

    def is_part(self, content: OutboundContent) -> bool:
        """A preview's later part of an answer too long for one card (the delivery splits it):
        a card of its own, with the text alone: the turn's card keeps the steps and the button."""
        live = content.live
        return live is not None and rendered_length(live.answer or live.note) > self.limit

    def placeholder(self, content: OutboundContent, stop: Mapping[str, str] | None) -> str:
        markdown = shown_text(content, self.limit)
        steps = () if stop is None and self.is_part(content) else steps_of(content)
        return live_card(
            markdown, steps, streaming=True, stop=stop, summary="…", language=language_of(content)
        )

    def opened(
        self, handle: MessageHandle, card_id: str, content: OutboundContent, stop: Any
    ) -> None:
        markdown = shown_text(content, self.limit)
        part = self.is_part(content)
        card = TurnCard(card_id, handle.chat.key, stop, markdown, part=part)
        card.steps = self._steps(card, content)
        self._cards.put(handle.message_id, card)
        if not part:
            self._open.setdefault(handle.chat.key, []).append(handle)

    def open_card(self, chat_key: str) -> MessageHandle | None:
        """The chat's one turn card not ended yet (None: none, or several)."""
        handles = [h for h in self._open.get(chat_key, []) if h.message_id in self._cards]
        return handles[0] if len(handles) == 1 else None

    async def preview(self, handle: MessageHandle, content: OutboundContent) -> None:
        card = self._card(handle)
        markdown = shown_text(content, self.limit)
        steps = self._steps(card, content)
        if steps != card.steps:
            whole = live_card(
                markdown, steps, streaming=True, stop=card.stop, summary="…",
                language=language_of(content),
            )  # fmt: skip
            await self.out.replace_card(card.card_id, whole, "preview")
            card.steps, card.markdown = steps, markdown
        elif markdown != card.markdown:
            await self.out.stream_text(card.card_id, ANSWER, markdown or " ", "preview")
            card.markdown = markdown

    async def final(
        self, handle: MessageHandle, content: OutboundContent, where: Mapping[str, Any]
    ) -> None:
        card = self._card(handle)
        markdown = shown_text(content, self.limit)
        steps = self._steps(card, content)
        whole = (
            steps != card.steps
            or content.display
            or card.stop is not None
            or not card.known
            or self.out.stream_age(card.card_id) >= self.out.stream_renew_s
        )
        if whole:
            summary = plain_text(content.text, 60)
            final = live_card(
                markdown,
                steps,
                streaming=False,
                hints=content.display,
                where=where,
                summary=summary,
                language=language_of(content),
            )
            await self.out.replace_card(card.card_id, final)
            card.steps, card.markdown, card.stop, card.known = steps, markdown, None, True
        elif markdown != card.markdown:
            await self.out.stream_text(card.card_id, ANSWER, markdown or " ", "final")
            card.markdown = markdown
        card.summary = plain_text(content.text, 60)
        await self.out.close_stream(card.card_id, card.summary)
        if content.live is None and not card.part:
            self._settling[card.chat_key] = card
        self._end(handle, card, forget=content.live is not None)
        if card.part:
            await self.settle(card.chat_key, content)

    async def settle(self, chat_key: str, content: OutboundContent) -> None:
        """The last part of a long answer is out: the turn's card shows its steps' ends."""
        card = self._settling.pop(chat_key, None) if content.live is not None else None
        if card is None or content.live is None:
            return
        steps = content.live.steps
        try:
            if steps != card.steps:
                whole = live_card(
                    card.markdown, steps, streaming=False, summary=card.summary,
                    language=language_of(content),
                )  # fmt: skip
                await self.out.replace_card(card.card_id, whole)
                card.steps = steps
        except ChannelError as exc:  # the answer is out; only the panels lag
            log.info("Feishu turn card's panels not ended: %s", exc)
        finally:
            self.out.forget_card(card.card_id)

    async def final_again(
        self, handle: MessageHandle, content: OutboundContent, where: Mapping[str, Any]
    ) -> None:
        """The delivery gave up on this card's final: once more, then as the answer alone."""
        try:
            await self.final(handle, content, where)
            return
        except RateLimited:
            raise
        except ChannelError as exc:
            log.warning("Feishu card final refused again (%s): the answer alone", exc)
        card = self._card(handle)
        markdown = shown_text(content, self.limit)
        alone = live_card(markdown, (), streaming=False, summary=plain_text(content.text, 60))
        await self.out.replace_card(card.card_id, alone)
        card.steps, card.markdown, card.stop = (), markdown, None
        try:
            await self.out.close_stream(card.card_id, plain_text(content.text, 60))
        except ChannelError as exc:  # the card holds the answer: the chat list may lag
            log.info("Feishu card streaming not turned off: %s", exc)
        self._end(handle, card)

    @staticmethod
    def _steps(card: TurnCard, content: OutboundContent) -> tuple[Step, ...]:
        """The steps the card shows: none on a later part; the last shown when the content
        has no live state (the first part of a long answer's final)."""
        if card.part:
            return ()
        return steps_of(content) if content.live is not None else card.steps

    def _card(self, handle: MessageHandle) -> TurnCard:
        card = self._cards.get(handle.message_id)
        if card is None:  # a card of an earlier process (adopted): nothing known of it
            card_id = str(handle.data["card_id"])
            card = TurnCard(card_id, handle.chat.key, None, "", (), known=False)
            self._cards.put(handle.message_id, card)
        return card

    def _end(self, handle: MessageHandle, card: TurnCard, *, forget: bool = True) -> None:
        handles = self._open.get(card.chat_key, [])
        handles[:] = [h for h in handles if h.message_id != handle.message_id]
        if not handles:
            self._open.pop(card.chat_key, None)
        if forget:
            self.out.forget_card(card.card_id)
