"""For the pairing tests: the gate's verdicts counted from its log, codes read from replies."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager

from bot.pipeline.pairing_codes import ALPHABET, CODE_LENGTH

# the code stands alone in the reply (a code span, which a platform may render without marks)
CODE = re.compile(f"(?<![A-Za-z0-9])([{ALPHABET}]{{{CODE_LENGTH}}})(?![A-Za-z0-9])")


def code_in(text: str) -> str:
    """The pairing code a reply carries."""
    found = CODE.search(text)
    assert found is not None, text
    return found.group(1)


class GateLog(logging.Handler):
    """Counts the gate's verdicts (one log line each, after the sender was told, if at all)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.verdicts: list[str] = []
        self._seen = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("pairing gate: "):
            self.verdicts.append(record.getMessage().removeprefix("pairing gate: "))
            self._seen.set()

    async def wait(self, count: int, timeout: float = 60.0) -> list[str]:
        async with asyncio.timeout(timeout):
            while len(self.verdicts) < count:
                self._seen.clear()
                await self._seen.wait()
        return self.verdicts


@contextmanager
def gate_log() -> Iterator[GateLog]:
    logger = logging.getLogger("bot.pipeline.pairing")
    handler, level = GateLog(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
