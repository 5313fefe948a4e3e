"""A terminal channel for `bot chat`: lines from stdin in, the answer streamed to stdout."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Awaitable, Callable
from typing import TextIO

from adapters.base import (
    ChannelError,
    ChannelLimits,
    ChatRef,
    InboundMessage,
    Inbox,
    MessageHandle,
    OutboundContent,
)


class TerminalChannel:
    """One conversation on a terminal. Edits print only what is new, so streaming reads naturally."""

    name = "terminal"

    def __init__(
        self,
        *,
        user_id: str = "local",
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        prompt: str = "you> ",
        wait_turn: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.chat = ChatRef(self.name, user_id)
        self.user_id = user_id
        self._stdin = stdin or sys.stdin
        self._out = stdout or sys.stdout
        self._prompt = prompt
        self._wait_turn = wait_turn  # prompt again only once the answer is complete
        self._shown: dict[str, str] = {}  # message id -> text already printed
        self.closed = asyncio.Event()  # set when stdin ends
        self.greeting = ""  # printed once before the first prompt

    def limits_for(self, chat: ChatRef) -> ChannelLimits:
        return ChannelLimits(
            max_text_length=1_000_000, min_edit_interval_s=0.05, can_edit=True, final_marker=True
        )

    async def run(self, inbox: Inbox) -> None:
        loop = asyncio.get_running_loop()
        try:
            if self.greeting:
                self._write(self.greeting + "\n")
            while True:
                self._write(self._prompt)
                line = await loop.run_in_executor(None, self._stdin.readline)
                if not line:
                    return
                text = line.strip()
                if not text:
                    continue
                event = uuid.uuid4().hex
                await inbox(
                    InboundMessage(self.chat, self.user_id, text, event, event, mentioned=True)
                )
                if self._wait_turn is not None:
                    await self._wait_turn()
        except ChannelError:
            return
        finally:
            self.closed.set()

    async def send(
        self,
        chat: ChatRef,
        content: OutboundContent,
        *,
        reply_to: str | None = None,
        final: bool = False,
        recipient: str | None = None,
    ) -> MessageHandle:
        handle = MessageHandle(chat, uuid.uuid4().hex[:12])
        self._write("bot> ")
        self._shown[handle.message_id] = ""
        await self.edit(handle, content, final=final)
        return handle

    async def edit(
        self, handle: MessageHandle, content: OutboundContent, *, final: bool = False
    ) -> None:
        shown = self._shown.get(handle.message_id, "")
        text = content.text
        if not final and text.startswith(shown) or final and text.startswith(shown) and shown:
            self._write(text[len(shown) :])
        elif shown and "\n" not in shown and self._out.isatty():
            self._write("\r\033[Kbot> " + text)  # the placeholder was replaced: overwrite its line
        else:
            self._write(("\nbot> " if shown else "") + text)
        self._shown[handle.message_id] = text
        if final:
            self._write("\n")
            self._shown.pop(handle.message_id, None)

    def _write(self, text: str) -> None:
        try:
            self._out.write(text)
            self._out.flush()
        except OSError as exc:  # the reader went away (a closed pipe): nobody to talk to
            self.closed.set()
            raise ChannelError(f"terminal output closed: {exc}") from exc
