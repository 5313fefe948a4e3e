"""The Feishu/Lark channel: ONE CardKit streaming card per turn, or a text message edited in place.

The placeholder is a card entity created with streaming mode on and sent as a reply. The card
is rendered from `content.live` (live_card.py): the answer (or the note before it) in the
markdown element the stream writes, a collapsible panel per specialist with its status, the
tools' lines, and, while the turn runs, a stop button (`stop_button`) whose press comes back
as "/stop" from the presser (normalize.py: in a group only the user the turn answers may).
Previews write the answer element, or the whole card when the steps changed; the final writes
the whole card (the button gone, panels ended, display hints) and turns streaming mode off.
Streaming is turned on again before Feishu's 10-minute close (outbound.py), and a final the
delivery would post anew lands in the same card (turn_cards.py): a turn never has a second
card. Where the app may not use CardKit (no `cardkit:card:write`), or with
`streaming: text`, answers are `post` messages edited with `PUT`, which Feishu allows 20 times a
message: the limits say so, and the channel itself never spends the last edit on a preview.
Receiving (long connection or HTTP callbacks) is in ingress.py.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from aiohttp import web

from adapters.base import (
    Attachment,
    ChannelLimits,
    ChatRef,
    InboundMessage,
    Inbox,
    MessageHandle,
    OutboundContent,
)
from adapters.budget import LocalRateBudget, Rank, RateBudget
from adapters.feishu import media
from adapters.feishu.api import NO_PERMISSION, ApiError, FeishuApi
from adapters.feishu.cards import card_json, post_content, with_hints
from adapters.feishu.config import base_url
from adapters.feishu.ingress import Ingress
from adapters.feishu.outbound import CARD_GAP_S, Outbound
from adapters.feishu.render import rendered_length, to_card_markdown
from adapters.feishu.turn_cards import TurnCards
from adapters.history import Claims
from adapters.platform_calls import NO_PLATFORM_CALLS, PlatformCalls
from adapters.telegram.recent import Recent
from content.blobs import BlobStore
from content.parts import BlobRef, MediaPart

log = logging.getLogger(__name__)

MAX_MARKDOWN_BYTES = 20_000  # of the card's 30 KB, with room for hints and the card's own JSON
MAX_EDITS = 20  # PUT edits of one text message (230072 after that) [doc]
REMEMBERED = 4096  # messages whose shown text and edit count are kept


@dataclass(frozen=True, slots=True)
class FeishuLimits(ChannelLimits):
    def length(self, text: str) -> int:
        return rendered_length(text)


class FeishuChannel:
    def __init__(
        self,
        *,
        app_id: str,
        name: str = "feishu",  # the instance's id: one app of several (channels.feishu[])
        app_secret: str,
        domain: str | None = None,
        mode: Literal["websocket", "webhook"] = "websocket",
        encrypt_key: str | None = None,
        verification_token: str | None = None,
        path: str = "/feishu/events",
        streaming: Literal["card", "text"] = "card",
        stop_button: bool = True,
        card_update_interval_s: float = 0.5,
        text_edit_interval_s: float = 1.5,
        request_timeout_s: float = 10.0,
        admits: Callable[[InboundMessage], bool] | None = None,
        budget: RateBudget | None = None,
        calls: PlatformCalls = NO_PLATFORM_CALLS,
        claims: Claims | None = None,
    ) -> None:
        self.name = name
        if mode == "webhook" and not (encrypt_key and verification_token):
            raise ValueError(
                "channels.feishu: webhook mode needs encrypt_key and verification_token (set "
                "FEISHU_ENCRYPT_KEY and FEISHU_VERIFICATION_TOKEN): without them anyone could "
                "post events"
            )
        self.base_url = base_url(domain)
        self._timeout_s = request_timeout_s
        self.api = FeishuApi(
            app_id=app_id,
            app_secret=app_secret,
            base_url=self.base_url,
            timeout_s=request_timeout_s,
            calls=calls,
        )
        self.out = Outbound(
            self.api,
            budget or LocalRateBudget(),
            card_interval_s=card_update_interval_s,
            edit_interval_s=text_edit_interval_s,
        )
        self.admits: Callable[[InboundMessage], bool] = admits or (lambda message: True)
        self.cards = streaming == "card"
        self.stop_button = stop_button
        self.turns = TurnCards(self.out, MAX_MARKDOWN_BYTES)
        # final_marker: a card's final also turns streaming off (its own call), so it is sent
        # even when the last preview already shows the final text; `edit` skips what is shown
        self._card_limits = FeishuLimits(  # CardKit's 10 operations a second per card
            MAX_MARKDOWN_BYTES, max(card_update_interval_s, CARD_GAP_S), final_marker=True
        )
        self._text_limits = FeishuLimits(
            MAX_MARKDOWN_BYTES,
            text_edit_interval_s,
            max_edits_per_message=MAX_EDITS,
            final_marker=True,
        )
        self._shown: Recent[str, str] = Recent(REMEMBERED)  # message id -> markdown shown
        self._edits: Recent[str, int] = Recent(REMEMBERED)  # text message id -> PUT edits
        self.groups: Recent[str, bool] = Recent(REMEMBERED)  # chat id -> is a group
        # thread id -> a message in it: a message of ours in a thread is a reply to it
        self.threads: Recent[str, str] = Recent(REMEMBERED)
        self.ingress = Ingress(
            self.api,
            name=name,
            base_url=self.base_url,
            groups=self.groups,
            threads=self.threads,
            admits=self.admits,
            reply=self._reply,
            mode=mode,
            app_secret=app_secret,
            encrypt_key=encrypt_key,
            verification_token=verification_token,
            path=path,
            claims=claims,
        )

    def limits_for(self, chat: ChatRef) -> ChannelLimits:
        return self._card_limits if self.cards else self._text_limits

    def install(self, app: web.Application) -> None:
        self.ingress.install(app)

    async def run(self, inbox: Inbox) -> None:
        await self.ingress.run(inbox)

    def platform_down(self) -> str | None:
        if self.ingress.connected:
            return None
        if self.ingress.stopped_reason:
            return self.ingress.stopped_reason
        if self.ingress.mode == "websocket":
            return "the tenant token or the long connection not up yet"
        return "the tenant token not fetched yet"

    def health(self) -> Mapping[str, Any]:
        return {
            self.name: {
                "mode": self.ingress.mode,
                "streaming": "card" if self.cards else "text",
                "connected": self.ingress.connected,
                "stopped": self.ingress.stopped_reason,
                "calls": self.api.calls,
                "rate_limited": self.api.rate_limited,
            }
        }

    # --- sending ------------------------------------------------------------------------------

    async def send(
        self,
        chat: ChatRef,
        content: OutboundContent,
        *,
        reply_to: str | None = None,
        final: bool = False,
        recipient: str | None = None,
    ) -> MessageHandle:
        rank: Rank = "final" if final else "send"
        markdown = to_card_markdown(content.text)
        if chat.thread_id:  # replies are what keeps a message in its thread
            reply_to = reply_to or self.threads.get(chat.thread_id)
        if self.cards and final and content.live is not None and not self.turns.is_part(content):
            # a delivery's final posted anew (its card refused it): into that card once more
            # (a long answer's later part is a message of its own)
            open_card = self.turns.open_card(chat.key)
            if open_card is not None:
                await self.turns.final_again(open_card, content, self._where(chat))
                return open_card
        if self.cards and not final:
            part = self.turns.is_part(content)  # a long answer's later part: no button
            stop = None if part else self._stop_value(chat, recipient)
            card = self.turns.placeholder(content, stop)
            try:
                card_id = await self.out.create_card(card)
            except ApiError as exc:
                if exc.code not in NO_PERMISSION:
                    raise
                log.warning(
                    "Feishu: this app may not use CardKit (%s); answers go as text messages "
                    "edited in place (grant cardkit:card:write for streaming cards)",
                    exc,
                )
                self.cards = False
            else:
                message = json.dumps({"type": "card", "data": {"card_id": card_id}})
                message_id = await self.out.post(
                    chat.chat_id,
                    "interactive",
                    message,
                    reply_to=reply_to,
                    rank=rank,
                    in_thread=bool(chat.thread_id),
                )
                handle = MessageHandle(chat, message_id, {"kind": "card", "card_id": card_id})
                self.turns.opened(handle, card_id, content, stop)
                return handle
        if self.cards:  # a final message of its own: an inline card, ended from the start
            card = card_json(
                content.text, streaming=False, hints=content.display, where=self._where(chat)
            )
            message_id = await self.out.post(
                chat.chat_id,
                "interactive",
                card,
                reply_to=reply_to,
                rank=rank,
                in_thread=bool(chat.thread_id),
            )
            self._shown.put(message_id, markdown)
            await self.turns.settle(chat.key, content)  # a long answer's last part
            return MessageHandle(chat, message_id, {"kind": "inline"})
        text = with_hints(markdown, content.display)
        message_id = await self.out.post(
            chat.chat_id,
            "post",
            post_content(text),
            reply_to=reply_to,
            rank=rank,
            in_thread=bool(chat.thread_id),
        )
        self._shown.put(message_id, text)
        return MessageHandle(chat, message_id, {"kind": "post"})

    async def _reply(self, message: InboundMessage, content: OutboundContent) -> None:
        await self.send(message.chat, content, reply_to=message.message_id, final=True)

    async def edit(
        self, handle: MessageHandle, content: OutboundContent, *, final: bool = False
    ) -> None:
        kind = handle.data.get("kind", "post")
        if kind == "card":
            await self._edit_card(handle, content, final)
            return
        rank: Rank = "final" if final else "preview"
        if kind == "inline":
            markdown = to_card_markdown(content.text)
            if self._shown.get(handle.message_id) == markdown and not content.display:
                return
            where = self._where(handle.chat)
            card = card_json(content.text, streaming=False, hints=content.display, where=where)
            await self.out.patch_card_message(handle.message_id, card, rank)
            self._shown.put(handle.message_id, markdown)
            return
        text = with_hints(to_card_markdown(content.text), content.display)
        if self._shown.get(handle.message_id) == text:
            return
        edits = self._edits.get(handle.message_id) or 0
        if not final and edits >= MAX_EDITS - 1:
            return  # the last edit this message may take is kept for the final
        await self.out.edit_post(handle.message_id, post_content(text), rank)
        self._edits.put(handle.message_id, edits + 1)
        self._shown.put(handle.message_id, text)

    async def _edit_card(
        self, handle: MessageHandle, content: OutboundContent, final: bool
    ) -> None:
        if final:
            await self.turns.final(handle, content, self._where(handle.chat))
        else:
            await self.turns.preview(handle, content)

    def _stop_value(self, chat: ChatRef, recipient: str | None) -> dict[str, str] | None:
        """The stop button's callback value: who may press it (the user the turn answers) and
        where the conversation lives. None: no button (off, or no user named)."""
        if not self.stop_button or not recipient:
            return None
        where = {key: value for key, value in self._where(chat).items() if value is not None}
        return {"by": recipient, **where}

    # --- files --------------------------------------------------------------------------------

    async def fetch(
        self, message: InboundMessage, attachment: Attachment, blobs: BlobStore
    ) -> BlobRef:
        return await media.fetch(
            self.api, self.base_url, message, attachment, blobs, self._timeout_s
        )

    async def send_part(
        self,
        chat: ChatRef,
        part: MediaPart,
        blobs: BlobStore,
        *,
        caption: str | None = None,
        reply_to: str | None = None,
    ) -> MessageHandle:
        """The caption (an image or file message has none) as a message of its own, then the
        uploaded file as an image, file or audio message, both in the answer's thread."""
        if caption:
            await self.send(chat, OutboundContent(caption), reply_to=reply_to, final=True)
        _, data = await blobs.get(part.blob.blob_id)
        async with self.out.uploading():
            msg_type, content = await media.upload(self.api, part, data)
        if chat.thread_id:
            reply_to = reply_to or self.threads.get(chat.thread_id)
        message_id = await self.out.post(
            chat.chat_id,
            msg_type,
            content,
            reply_to=reply_to,
            rank="final",
            in_thread=bool(chat.thread_id),
        )
        return MessageHandle(chat, message_id, {"kind": msg_type})

    def _where(self, chat: ChatRef) -> dict[str, str | None]:
        """What a button's callback needs to find the conversation again."""
        group = self.groups.get(chat.chat_id)
        return {"thread": chat.thread_id, "group": None if group is None else str(int(group))}
