"""The operator place: a Slack channel where approvers see each request with the same buttons.

`approvals.place: slack:<instance>/<channel id>`. One message per request, posted through the
Slack instance the gateway runs (its Block Kit buttons come back as `block_actions` on that
channel, which the desk takes: bot/approvals/desk.py), edited into the verdict once decided.
Kept small and on its own: the operator handoff posts into a channel the same way.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from typing import Final

from adapters.base import Channel, ChannelError, ChatRef, OutboundContent
from bot.approvals.prompt import buttons_hint
from bot.pipeline.places import Place
from bot.storage.rows import ApprovalRow
from bot.storage.turns import handle_from_record, handle_record
from content.texts import DEFAULT_LANGUAGE, t
from tools.display import alert

log = logging.getLogger(__name__)

DEADLINE_S: Final = 15.0  # a Slack that does not answer must not hold the turn


class OperatorPlace:
    def __init__(self, name: Place, channels: Mapping[str, Channel]) -> None:
        channel = channels.get(name.instance)
        if channel is None:
            raise ValueError(
                f"approvals.place names Slack instance {name.instance!r}, which is not enabled;"
                f" running: {sorted(channels)}"
            )
        self.name = name
        self.channel = channel
        self.chat = ChatRef(name.instance, name.chat_id)

    @property
    def key(self) -> str:
        return self.name.key

    async def ask(self, row: ApprovalRow, asked: str) -> str | None:
        """Post the request with its buttons; the message's handle as JSON (None: not posted,
        which is logged; the request still expires into a denial)."""
        head = t(DEFAULT_LANGUAGE, "approval.place_request", conversation=row.conversation_key,
                 user=row.user_id)  # fmt: skip
        text = f"{head}\n{asked}"
        content = OutboundContent(text, (buttons_hint(DEFAULT_LANGUAGE, text, row.id),))
        try:
            async with asyncio.timeout(DEADLINE_S):
                handle = await self.channel.send(self.chat, content, final=True)
        except (ChannelError, TimeoutError) as exc:
            log.error("approval %s not posted to %s: %s", row.id, self.key, exc)
            return None
        return json.dumps(handle_record(handle))

    async def settle(self, row: ApprovalRow, line: str) -> None:
        """The request's message without its buttons, saying how it was decided."""
        handle = handle_from_record(json.loads(row.notice)) if row.notice else None
        if handle is None:
            return
        head = t(DEFAULT_LANGUAGE, "approval.place_request", conversation=row.conversation_key,
                 user=row.user_id)  # fmt: skip
        text = f"{head}\n`{row.tool_name}` {row.arguments}"
        # the verdict as a hint of its own: Block Kit again, so the buttons' blocks are replaced
        content = OutboundContent(text, (alert("info", line),))
        try:
            async with asyncio.timeout(DEADLINE_S):
                await self.channel.edit(handle, content, final=True)
        except (ChannelError, TimeoutError) as exc:
            log.warning("approval %s: its message in %s not updated: %s", row.id, self.key, exc)
