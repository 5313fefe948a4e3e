"""A terminal channel for `bot chat`: typed lines in, the answer streamed out.

On a terminal it is a REPL (prompt_toolkit, see `adapters/terminal_prompt.py`): the prompt stays
open while the answer streams, so `/stop` and Ctrl-C reach the bot mid-answer. With piped input
it reads plain lines and answers each before reading the next, so scripts get one answer a line;
into a pipe or a file only the final answer is written (a preview edit could only be written
again below the last, doubling what was said). Markdown is shown as plain text (bullets, table
grids, a link's address after its label), as adapters/markdown.py renders it for every channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
import threading
import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from adapters import terminal_files
from adapters.base import (
    Attachment,
    ChannelError,
    ChannelLimits,
    ChatRef,
    InboundMessage,
    Inbox,
    MessageHandle,
    OutboundContent,
)
from adapters.markdown import Renderer
from content.blobs import BlobStore
from content.parts import BlobRef, MediaPart

if TYPE_CHECKING:
    from adapters.terminal_prompt import Repl


def locale_language(environ: Mapping[str, str]) -> str | None:
    """The POSIX locale's name (`de_DE.UTF-8`), or None where none is set; `LANGUAGE`, a list,
    would come first for gettext but is set by desktops more than by people."""
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        if environ.get(name):
            return environ[name]
    return None


class PlainText(Renderer):
    """Markdown as a terminal shows it: the plain text, with each link's address."""

    def link(self, inner: str, url: str) -> str:
        return inner if inner == url else f"{inner} ({url})"


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
        interactive: bool | None = None,
        files_dir: Path | None = None,
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        """`files_dir`: where files the bot sends are saved (a folder in the temp dir unless
        given). The gateway's own texts are in the locale's language (`LC_ALL`, `LC_MESSAGES`,
        `LANG`, the first set, as gettext reads them)."""
        self.chat = ChatRef(self.name, user_id)
        self.language = locale_language(environ)
        self.user_id = user_id
        self._stdin = stdin or sys.stdin
        self._out = stdout or sys.stdout
        self._prompt = prompt
        self._wait_turn = wait_turn  # until the answer is complete
        self._shown: dict[str, str] = {}  # message id -> text already printed
        self._plain = PlainText()
        self.closed = asyncio.Event()  # set when the user quits (or stdin ends)
        self.greeting = ""  # printed once before the first prompt
        self.files_dir = files_dir or Path(tempfile.gettempdir()) / "bot-files"
        self.files_read = 0  # files fetched from a `/file` line
        if interactive is None:
            interactive = self._stdin.isatty() and self._out.isatty()
        self._repl: Repl | None = None
        if interactive:
            from adapters.terminal_prompt import Repl  # prompt_toolkit: only on a terminal

            self._repl = Repl(prompt, wait_turn)

    @property
    def interactive(self) -> bool:
        return self._repl is not None

    def limits_for(self, chat: ChatRef) -> ChannelLimits:
        return ChannelLimits(
            max_text_length=1_000_000, min_edit_interval_s=0.05, can_edit=True, final_marker=True
        )

    def platform_down(self) -> str | None:
        return None  # no platform: the terminal is right here

    async def run(self, inbox: Inbox) -> None:
        try:
            if self._repl is not None:
                await self._repl.run(self.greeting, lambda text: inbox(self.typed(text)))
            else:
                await self._read_lines(inbox)
        except ChannelError:
            return
        finally:
            self.closed.set()

    def typed(self, text: str) -> InboundMessage:
        """A line the user typed, as the gateway receives it."""
        event = uuid.uuid4().hex
        said, files = terminal_files.attachment(text)
        return InboundMessage(
            self.chat,
            self.user_id,
            said,
            event,
            event,
            mentioned=True,
            attachments=files,
            language=self.language,
        )

    async def fetch(
        self, message: InboundMessage, attachment: Attachment, blobs: BlobStore
    ) -> BlobRef:
        blob = await terminal_files.fetch(attachment, blobs)
        self.files_read += 1
        return blob

    async def send_part(
        self,
        chat: ChatRef,
        part: MediaPart,
        blobs: BlobStore,
        *,
        caption: str | None = None,
        reply_to: str | None = None,
    ) -> MessageHandle:
        """Saved to `files_dir`; the message names where (and says the caption)."""
        path = await terminal_files.save(self.files_dir, part, blobs)
        text = f"[{part.type} saved to {path}]" + (f" {caption}" if caption else "")
        return await self.send(chat, OutboundContent(text), reply_to=reply_to, final=True)

    async def _read_lines(self, inbox: Inbox) -> None:
        if self.greeting:
            self._write(self.greeting + "\n")
        while True:
            self._write(self._prompt)
            line = await self._readline()
            if not line:
                return
            text = line.strip()
            if not text:
                continue
            await inbox(self.typed(text))
            if self._wait_turn is not None:
                await self._wait_turn()

    async def _readline(self) -> str:
        """One line, read in a daemon thread: a read blocked at the prompt never holds up the
        exit (a pool thread would: Ctrl-C would wait for Enter)."""
        loop = asyncio.get_running_loop()
        line: asyncio.Future[str] = loop.create_future()

        def deliver(result: str | BaseException) -> None:
            if line.done():
                return
            if isinstance(result, BaseException):
                line.set_exception(result)
            else:
                line.set_result(result)

        def read() -> None:
            result: str | BaseException
            try:
                result = self._stdin.readline()
            except (OSError, ValueError) as exc:  # stdin closed under the reader
                result = exc
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
                loop.call_soon_threadsafe(deliver, result)

        threading.Thread(target=read, name="terminal-stdin", daemon=True).start()
        return await line

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
        if self._repl is not None:
            self._repl.show(handle.message_id, self._plain.render(content.text), final=final)
            return handle
        if not self._out.isatty():  # a pipe gets the final answer only
            if final:
                self._write(f"bot> {self._plain.render(content.text)}\n")
            return handle
        self._write("bot> ")
        self._shown[handle.message_id] = ""
        await self.edit(handle, content, final=final)
        return handle

    async def edit(
        self, handle: MessageHandle, content: OutboundContent, *, final: bool = False
    ) -> None:
        text = self._plain.render(content.text)
        if self._repl is not None:
            self._repl.show(handle.message_id, text, final=final)
            return
        if not self._out.isatty():
            if final:
                self._write(f"bot> {text}\n")
            return
        shown = self._shown.get(handle.message_id, "")
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
