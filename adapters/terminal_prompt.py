"""The REPL of `bot chat` on a terminal: the prompt stays open while the answer streams.

prompt_toolkit draws the prompt; finished lines of the answer are printed above it, and the line
still being written is shown just above the input, so typing never mixes with the answer.
Ctrl-C while the bot answers is `/stop`; Ctrl-C or Ctrl-D at an idle prompt quits at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from prompt_toolkit import PromptSession, print_formatted_text
from prompt_toolkit.patch_stdout import patch_stdout

BOT = "bot> "
STOP = "/stop"

Say = Callable[[str], Awaitable[None]]


@dataclass
class _Live:
    """A bot message still being written."""

    text: str = ""
    printed: int = 0  # how much of `text` is above the prompt already: whole lines
    streamed: bool = False  # it grew in place at least once: worth keeping if replaced


class Repl:
    def __init__(self, prompt: str, wait_turn: Callable[[], Awaitable[None]] | None) -> None:
        self._prompt = prompt
        self._wait_turn = wait_turn
        self._live: dict[str, _Live] = {}  # message id -> its state
        self._turn: asyncio.Future[None] | None = None  # done when the answer asked for is complete
        self._answered = False  # its final text is out (the turn's bookkeeping may go on)
        self._session: PromptSession[str] | None = None

    @property
    def busy(self) -> bool:
        """The bot is answering (or about to): Ctrl-C means /stop, not quit."""
        waiting = self._turn is not None and not self._turn.done() and not self._answered
        return bool(self._live) or waiting

    async def run(self, greeting: str, say: Say) -> None:
        """Read lines until the user quits; each becomes `say(line)`."""
        session: PromptSession[str] = PromptSession(self._message)
        self._session = session
        try:
            with patch_stdout():  # a stray print lands above the prompt, not inside it
                if greeting:
                    self._print(greeting)
                while True:
                    try:
                        line = await session.prompt_async()
                    except KeyboardInterrupt:
                        if not self.busy:
                            return
                        await say(STOP)
                        continue
                    except EOFError:
                        if self.busy:
                            await say(STOP)  # quitting mid-answer: end it as stopped, then go
                        return
                    text = line.strip()
                    if not text:
                        continue
                    command = text.startswith("/")
                    if not command:
                        self._answered = False
                    await say(text)
                    if self._wait_turn is not None and not command:
                        self._turn = asyncio.ensure_future(self._wait_turn())
        finally:
            if self._turn is not None:
                self._turn.cancel()

    def show(self, message_id: str, text: str, *, final: bool) -> None:
        """A bot message was posted or edited: print what is new above the prompt."""
        live = self._live.pop(message_id, None)
        if live is None:
            live = _Live()
        elif final:
            self._answered = True
        if live.streamed and not text.startswith(live.text):
            # replaced after it streamed (stopped, failed): what was said stays on screen
            self._advance(live, live.text, final=True)
            live = _Live()
        elif not text.startswith(live.text[: live.printed]):
            live = _Live()  # lines already printed were rewritten: print it again below
        elif live.text and len(text) > len(live.text) and text.startswith(live.text):
            live.streamed = True
        self._advance(live, text, final=final)
        if not final:
            self._live[message_id] = live
        if self._session is not None:
            self._session.app.invalidate()  # redraw the line being written

    def _advance(self, live: _Live, text: str, *, final: bool) -> None:
        """Print the lines of `text` that are complete (all of it when final) and not yet shown."""
        live.text = text
        rest = text[live.printed :]
        cut = len(rest) if final else rest.rfind("\n") + 1
        if cut == 0 and not (final and live.printed == 0):
            return
        prefix = BOT if live.printed == 0 else ""
        self._print(prefix + rest[:cut].removesuffix("\n"))
        live.printed += cut

    def _print(self, text: str) -> None:
        """`text` above the prompt. Not prompt_toolkit's run_in_terminal: that puts the terminal
        in cooked mode while it prints, where a Ctrl-C or Ctrl-D typed at that moment is lost."""
        app = self._session.app if self._session is not None else None
        if app is None or not app.is_running:
            print_formatted_text(text)
            return
        app.renderer.erase()  # the prompt's lines become the text's; it is drawn again below
        app.output.write(text + "\n")  # (write() shows escape characters, never obeys them)
        app.output.flush()
        app.invalidate()

    def _message(self) -> str:
        """The prompt: the lines being written, then the input line."""
        lines = [
            (BOT if live.printed == 0 else "") + live.text[live.printed :]
            for live in self._live.values()
            if live.printed == 0 or live.printed < len(live.text)
        ]
        return "\n".join([*lines, self._prompt])
