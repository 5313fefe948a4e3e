"""A recording fake channel for delivery and gateway tests: every send and edit, in order."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from adapters.base import (
    ChannelError,
    ChannelLimits,
    ChatRef,
    DeliveryUncertain,
    Inbox,
    MessageHandle,
    OutboundContent,
    RateLimited,
)
from adapters.live import Live


@dataclass
class Call:
    kind: str  # send | edit
    message_id: str
    text: str
    final: bool
    at: float = field(default_factory=time.monotonic)
    stopped: bool = False  # the final of a stopped answer (`OutboundContent.stopped`)
    live: Live | None = None  # the turn's state in parts (`OutboundContent.live`)


class RecordingChannel:
    name = "fake"

    def __init__(
        self, limits: ChannelLimits | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.clock = clock  # stamps each call's `at` (a test's FakeClock, with the delivery's)
        self.limits = limits or ChannelLimits(max_text_length=100, min_edit_interval_s=0.05)
        self.calls: list[Call] = []
        self.rate_limit_next: list[float] = []  # retry_after values for the next edits
        self.edit_gate: asyncio.Event | None = None  # hold edits until set
        self.gated: list[str] = []  # texts of the edits that reached the closed gate
        self.rate_limited: list[float] = []  # when each forced 429 was raised
        self.changed = asyncio.Event()
        self.uncertain_sends_next = 0  # the next N sends land but their answer is lost
        self.refuse_edits_next = 0  # the next N edits are refused (a 5xx, say): nothing changes
        self.refused: list[str] = []  # texts of the refused edits
        self._ids = 0
        self.inbox: Inbox | None = None

    def limits_for(self, chat: ChatRef) -> ChannelLimits:
        return self.limits

    async def run(self, inbox: Inbox) -> None:
        self.inbox = inbox
        await asyncio.Future()

    async def send(
        self,
        chat: ChatRef,
        content: OutboundContent,
        *,
        reply_to: str | None = None,
        final: bool = False,
        recipient: str | None = None,
    ) -> MessageHandle:
        self._ids += 1
        handle = MessageHandle(chat, f"m{self._ids}")
        self._record(Call("send", handle.message_id, content.text, final, self.clock()))
        if self.uncertain_sends_next:
            self.uncertain_sends_next -= 1
            raise DeliveryUncertain("no answer; the message may have been posted")
        return handle

    async def edit(
        self, handle: MessageHandle, content: OutboundContent, *, final: bool = False
    ) -> None:
        if self.edit_gate is not None and not self.edit_gate.is_set():
            self.gated.append(content.text)
            self.changed.set()
            await self.edit_gate.wait()
        if self.rate_limit_next:
            self.rate_limited.append(self.clock())
            self.changed.set()
            raise RateLimited(self.rate_limit_next.pop(0))
        if self.refuse_edits_next:
            self.refuse_edits_next -= 1
            self.refused.append(content.text)
            self.changed.set()
            raise ChannelError("edit refused: 502 Bad Gateway")
        call = Call(
            "edit", handle.message_id, content.text, final, self.clock(), content.stopped,
            content.live,
        )  # fmt: skip
        self._record(call)

    def _record(self, call: Call) -> None:
        self.calls.append(call)
        self.changed.set()

    def shown(self) -> list[str]:
        """What each message shows last, in the order they were posted. (A final edit is
        skipped when a preview already showed that text, which depends on timing, so what the
        user ends up seeing is the thing to assert, not which call carried `final`.)"""
        last: dict[str, str] = {}
        for call in self.calls:
            last[call.message_id] = call.text
        return list(last.values())

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():
                self.changed.clear()
                await self.changed.wait()

    def texts(self, message_id: str) -> list[str]:
        return [c.text for c in self.calls if c.message_id == message_id]
