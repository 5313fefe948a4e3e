"""`bot chat` in a real pseudo-terminal, against a model that streams slowly: a REPL that listens.

The child process is the real CLI; the model is the real OpenAI client against a local fake that
sends a few words and then nothing more (until the client gives up), so the answer is still
streaming when the test types, however busy the machine.
"""

from __future__ import annotations

import asyncio
import codecs
import fcntl
import json
import os
import pty
import re
import struct
import sys
import termios
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from content.texts import t
from tests.fake_llm import Reply, llm_config
from tests.fake_openai import FakeOpenAI

# a hang guard per test: its inner waits (a start, then an exit) add up past the default 60 s
pytestmark = [pytest.mark.process, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parent.parent
ESCAPE = re.compile(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|[@-Z\\-_])")
WORDS = [f"word{i} " for i in range(200)]
# In its own session, the child takes the pseudo-terminal as its controlling terminal, as a
# shell would give it: then Ctrl-C typed while the terminal is in cooked mode is a SIGINT.
# The child takes the pty as its controlling terminal and Ctrl-C's default meaning, as a shell
# gives a program it starts: a test run started in the background (`.ci/run &`) ignores SIGINT,
# and an ignored signal stays ignored across exec.
CONTROLLING_TTY = (
    "import fcntl, os, signal, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0);"
    " signal.signal(signal.SIGINT, signal.SIG_DFL);"
    " os.execv(sys.executable, [sys.executable, '-m', 'bot', *sys.argv[1:]])"
)


class Terminal:
    """A child process on a pseudo-terminal; `text` is what it printed, escapes removed."""

    def __init__(self, process: asyncio.subprocess.Process, master: int) -> None:
        self.process = process
        self.master = master
        self.raw = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._changed = asyncio.Event()
        asyncio.get_running_loop().add_reader(master, self._read)

    @classmethod
    async def start(cls, *args: str, cwd: Path, lang: str | None = None) -> Terminal:
        master, slave = pty.openpty()
        # a wide window: no line wraps inside the words the test looks for
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))
        env = {
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(ROOT),
            "TERM": "xterm",
            "PROMPT_TOOLKIT_NO_CPR": "1",  # nobody answers cursor position requests here
        }
        if lang is not None:
            env["LANG"] = lang
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            CONTROLLING_TTY,
            *args,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
        os.close(slave)
        return cls(process, master)

    @property
    def text(self) -> str:
        return ESCAPE.sub("", self.raw)

    def _read(self) -> None:
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the child closed its end
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self.master)
        self.raw += self._decoder.decode(data)
        self._changed.set()

    async def expect(self, text: str, timeout: float = 30) -> None:
        async with asyncio.timeout(timeout):
            while text not in self.text:
                self._changed.clear()
                await self._changed.wait()

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    async def exit_code(self, timeout: float) -> int:
        async with asyncio.timeout(timeout):
            return await self.process.wait()

    def close(self) -> None:
        asyncio.get_running_loop().remove_reader(self.master)
        if self.process.returncode is None:
            self.process.kill()
        os.close(self.master)


@pytest.fixture
async def slow_model() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(script=lambda body: Reply(text=WORDS, stall_after=12)) as fake:
        yield fake


@pytest.fixture
async def chat(tmp_path: Path, slow_model: FakeOpenAI) -> AsyncIterator[Terminal]:
    config = {
        "storage": {"path": str(tmp_path / "data" / "chat.db")},
        "personas": {"dirs": [str(ROOT / "personas")]},
        "llm": llm_config("openai", slow_model, total_timeout_s=60),
    }
    (tmp_path / "config.yaml").write_text(json.dumps(config))
    terminal = await Terminal.start("chat", cwd=tmp_path)
    try:
        await terminal.expect("Chatting with 'default'")
        yield terminal
    finally:
        terminal.close()
        await terminal.process.wait()


async def test_the_gateways_own_texts_are_in_the_locales_language(
    tmp_path: Path, slow_model: FakeOpenAI
) -> None:
    config = {
        "storage": {"path": str(tmp_path / "chat.db")},
        "llm": llm_config("openai", slow_model),
    }
    (tmp_path / "config.yaml").write_text(json.dumps(config))
    terminal = await Terminal.start("chat", cwd=tmp_path, lang="de_DE.UTF-8")
    try:
        terminal.type("/new\r")
        await terminal.expect(t("de", "command.started_new"))
    finally:
        terminal.close()
        await terminal.process.wait()


async def test_stop_typed_while_the_answer_streams_stops_it(chat: Terminal, tmp_path: Path) -> None:
    chat.type("tell me a long story\r")
    await chat.expect("word5")
    chat.type("/stop\r")
    await chat.expect("⏹ Stopped.")
    text = chat.text
    assert "Nothing to stop." not in text
    assert "word" not in text[text.index("⏹ Stopped.") :]  # nothing streams after the stop
    # what streamed before the stop stays in the answer, which ends with the stopped mark
    said = text.rindex("bot> word0 word1 word2 word3 word4 word5")
    assert said < text.index("⏹ Stopped.")
    assert "bot> ⏹ Stopped." not in text  # not replaced by the mark
    # the gateway logged the stop mid-stream: into the log file, not into the conversation
    log = (tmp_path / "data" / "chat.log").read_text()
    assert "bot.pipeline.commands: stopped terminal:local" in log
    assert "stopped terminal:local" not in text and " INFO " not in text
    chat.type("\x03")  # Ctrl-C at an idle prompt: quit, no Enter needed
    assert await chat.exit_code(timeout=15) == 0


async def test_ctrl_c_mid_answer_stops_it_and_ctrl_d_quits(chat: Terminal) -> None:
    chat.type("tell me a long story\r")
    await chat.expect("word5")
    chat.type("\x03")
    await chat.expect("⏹ Stopped.")
    assert "restarted" not in chat.text and "Nothing to stop." not in chat.text
    chat.type("\x04")  # Ctrl-D at an idle prompt
    assert await chat.exit_code(timeout=15) == 0
    assert "word" not in chat.text[chat.text.index("⏹ Stopped.") :]


async def test_ctrl_c_at_the_prompt_of_the_line_mode_quits_without_enter(tmp_path: Path) -> None:
    # typed input, output to a pipe (`bot chat | tee`): the plain line mode, waiting in a read
    master, slave = pty.openpty()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CONTROLLING_TTY,
        "chat",
        stdin=slave,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        start_new_session=True,
    )
    os.close(slave)
    try:
        assert process.stdout is not None
        async with asyncio.timeout(30):
            assert "Ctrl-D to quit" in (await process.stdout.readline()).decode()
            assert await process.stdout.readexactly(5) == b"you> "
        os.write(master, b"\x03")  # the terminal sends SIGINT
        async with asyncio.timeout(60):  # a hang guard: the exit is slow on a busy machine
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        os.close(master)
