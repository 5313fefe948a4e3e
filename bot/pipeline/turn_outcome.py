"""How a turn ended (`Outcome`) and the notes its placeholder ends with when it was no answer.

Shared by the runner of new turns (`bot/pipeline/turn.py`) and of resumed ones (`bot/pipeline/resume.py`). A
storage failure is its own ending: the messages are in no store, so the user is asked to send
them again and their events are reopened, so that a platform's retry is answered.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adapters.base import InboundMessage
from bot.pipeline.dedup import Dedup
from bot.pipeline.delivery import APOLOGY
from bot.storage.base import StorageError
from content.parts import Part
from content.texts import DEFAULT_LANGUAGE, t
from tools.redact import redact_credentials

log = logging.getLogger(__name__)

# in English (tests and logs); a turn says them in its conversation's language: t(language, key)
STOPPED = t(DEFAULT_LANGUAGE, "turn.stopped")
TIMED_OUT = t(DEFAULT_LANGUAGE, "turn.timed_out")
INTERRUPTED = t(DEFAULT_LANGUAGE, "turn.interrupted")
STORAGE_FAILED = t(DEFAULT_LANGUAGE, "turn.storage_failed")


@dataclass(slots=True)
class Outcome:
    """The turn's status (as `turns.status` keeps it), the text its placeholder ends with, the
    display hints and media that go with it, and what went wrong (for `turns.error`)."""

    status: str = "failed"
    text: str = APOLOGY
    display: tuple[Mapping[str, Any], ...] = ()
    error: str | None = None
    parts: tuple[Part, ...] = ()  # media the answer carries


async def storage_failed(
    batch: list[InboundMessage], exc: StorageError, dedup: Dedup, language: str = DEFAULT_LANGUAGE
) -> Outcome:
    """The messages are in no store: say so in the log, ask the user to send them again, and
    reopen their events so a platform's retry is answered (`Dedup.reopen`)."""
    log.error(
        "storage failed in %s; message(s) %s not kept, the user is asked to send again: %s",
        batch[-1].conversation_key,
        ", ".join(m.event_id for m in batch),
        exc,
    )
    try:
        for message in batch:
            await dedup.reopen(message.event_id)
    except StorageError:
        pass  # the same failure, logged above; the claims expire with their TTL
    return Outcome("failed", t(language, "turn.storage_failed"), error=f"storage: {exc}")


def storage_fault(exc: BaseException) -> StorageError | None:
    """The storage failure inside `exc` (a task group's, say), if there is one."""
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if (fault := storage_fault(inner)) is not None:
                return fault
    return None


def describe(exc: BaseException) -> str:
    """For `turns.error`: an error's text may hold a URL with its password (from any library)."""
    return redact_credentials(f"{type(exc).__name__}: {exc}")
