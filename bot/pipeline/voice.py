"""Before a turn: its voice notes transcribed (speech to text), and what was heard shown.

After the files are fetched (bot/pipeline/attachments.py) and before the turn is recorded, each
audio part without a transcript is sent to the transcriber, several at once (bounded per
process). The transcript is kept on the part, so the recorded turn, the history, a resumed turn
and a restart read it and never transcribe again; the model reads it as the user's words (the
part's description: content/parts.py). The live message starts with "🎙 heard: …" while the
model works.

A voice note not heard (no `stt` configured, the service failing, silence) gets its sender told
why, once per message, and the rest of the message is answered; a batch of nothing else makes
no model call: the reason is the whole reply.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from adapters.base import ChannelLimits, InboundMessage
from bot.pipeline.attachments import Refusal
from bot.speech.base import (
    UNOBSERVED,
    SpeechObserver,
    Transcriber,
    TranscriptionError,
    too_large,
)
from content.blobs import BlobError, BlobStore
from content.parts import AudioPart, Part
from content.texts import DEFAULT_LANGUAGE, t
from tools.pii import PiiMasker

log = logging.getLogger(__name__)

HEARD_MAX_CHARS = 280  # of one transcript in the live message; the model reads all of it


@dataclass(frozen=True, slots=True)
class Heard:
    batch: list[InboundMessage]  # each audio part with its transcript, where one was heard
    lines: tuple[str, ...] = ()  # what the live message shows of them
    notes: tuple[Refusal, ...] = ()  # voice notes not heard: why, to their senders
    nothing_else: bool = False  # the batch held only voice notes not heard: no model call

    def placeholder(self, limits: ChannelLimits, language: str = DEFAULT_LANGUAGE) -> str:
        """The live message's first text: what was heard, then the usual placeholder; the
        last lines left out where the channel's message would be too long for them all."""
        thinking = t(language, "turn.placeholder")
        for count in range(len(self.lines), 0, -1):
            more = len(self.lines) - count
            extra = [t(language, "voice.heard_more", count=more)] if more else []
            text = "\n".join([*self.lines[:count], *extra]) + f"\n\n{thinking}"
            if limits.length(text) <= limits.max_text_length:
                return text
        return thinking

    @property
    def reply(self) -> str:
        """The whole answer of a batch of nothing else: why nothing was heard."""
        return "\n".join(dict.fromkeys(note.reply for note in self.notes))


class Hearing:
    """The turn's step; `transcriber` None when `stt` is off (the senders are told)."""

    def __init__(
        self,
        transcriber: Transcriber | None,
        blobs: BlobStore | None,
        *,
        concurrency: int = 4,
        observer: SpeechObserver = UNOBSERVED,
    ) -> None:
        self.transcriber = transcriber
        self.blobs = blobs
        self.observer = observer  # counts each voice note's outcome (metrics)
        self._slots = asyncio.Semaphore(concurrency)  # transcriptions at once, every turn's

    def describe(self) -> str:
        """For the start-up log: who transcribes, or that no one does."""
        if self.transcriber is None:
            return "not transcribed (stt.base_url is not set; senders are told voice is off)"
        return f"transcribed by {self.transcriber.describe()}"

    async def aclose(self) -> None:
        if self.transcriber is not None:
            await self.transcriber.aclose()

    async def hear(
        self,
        batch: Sequence[InboundMessage],
        masker: PiiMasker | None = None,
        language: str = DEFAULT_LANGUAGE,
    ) -> Heard:
        """The batch with its voice notes transcribed. `masker` (`tools.pii.mask_user_text`)
        masks what is kept and what the model reads, as it does typed text; the live message
        shows the sender's own words unmasked."""
        waiting = [
            (index, part)
            for index, message in enumerate(batch)
            for part in message.parts
            if isinstance(part, AudioPart) and part.transcript is None
        ]
        if not waiting:
            return Heard(list(batch))
        if self.transcriber is None or self.blobs is None:
            for _ in waiting:
                self.observer.transcription("off", 0.0)
            told = dict.fromkeys(index for index, _ in waiting)
            notes = tuple(Refusal(batch[index], t(language, "voice.off")) for index in told)
            return _heard(list(batch), (), notes)
        # one request per recording (the same one forwarded twice is heard once)
        recordings = {part.blob.blob_id: part for _, part in waiting}
        async with asyncio.TaskGroup() as group:
            tasks = {key: group.create_task(self._one(part)) for key, part in recordings.items()}
        heard: dict[str, str] = {}  # blob id -> the transcript kept
        lines: list[str] = []
        reasons: dict[int, list[str]] = {}  # message index -> why its notes were not heard
        for index, part in waiting:
            said, why = tasks[part.blob.blob_id].result()
            if said is None:
                reasons.setdefault(index, []).append(why)
                continue
            lines.append(t(language, "voice.heard", transcript=shortened(said)))
            heard[part.blob.blob_id] = masker.mask(said) if masker is not None else said
        done = [_with_transcripts(message, heard) for message in batch]
        notes = tuple(
            Refusal(
                done[index], t(language, "voice.not_transcribed", reason=_reasons(language, why))
            )
            for index, why in reasons.items()
        )
        return _heard(done, tuple(lines), notes)

    async def _one(self, part: AudioPart) -> tuple[str | None, str]:
        """(transcript, "") or (None, why not)."""
        assert self.transcriber is not None and self.blobs is not None
        blob, limit = part.blob, self.transcriber.max_bytes
        if blob.size > limit:  # its size is known: not even read
            self.observer.transcription("too_large", 0.0)
            return None, str(too_large(blob.size, limit))
        async with self._slots:
            started = time.monotonic()
            try:
                mime, data = await self.blobs.get(blob.blob_id)
            except BlobError as exc:
                log.warning("voice note %s not read: %s", blob.blob_id[:12], exc)
                self.observer.transcription("unread", 0.0)
                return None, _NOT_READ
            try:
                said = await self.transcriber.transcribe(data, mime_type=blob.mime_type or mime)
            except TranscriptionError as exc:
                log.warning("voice note %s not transcribed: %s", blob.blob_id[:12], exc)
                self.observer.transcription("failed", time.monotonic() - started)
                return None, str(exc)
        elapsed = time.monotonic() - started
        self.observer.transcription("ok" if said else "silent", elapsed)
        log.info(
            "voice note %s (%d bytes) transcribed in %.2f s: %d characters",
            blob.blob_id[:12], blob.size, elapsed, len(said),
        )  # fmt: skip
        return (said, "") if said else (None, _NOTHING_HEARD)


# reasons of our own, told in the conversation's language (the transcriber's are its own words)
_NOT_READ, _NOTHING_HEARD = "voice.not_read", "voice.nothing_heard"


def _reasons(language: str, why: list[str]) -> str:
    own = (_NOT_READ, _NOTHING_HEARD)
    return "; ".join(t(language, w) if w in own else w for w in dict.fromkeys(why))


def _with_transcripts(message: InboundMessage, heard: dict[str, str]) -> InboundMessage:
    def transcribed(part: Part) -> Part:
        if isinstance(part, AudioPart) and part.transcript is None and part.blob.blob_id in heard:
            return replace(part, transcript=heard[part.blob.blob_id])
        return part

    parts = tuple(transcribed(part) for part in message.parts)
    return message if parts == message.parts else replace(message, parts=parts)


def _heard(
    batch: list[InboundMessage], lines: tuple[str, ...], notes: tuple[Refusal, ...]
) -> Heard:
    nothing_else = bool(notes) and not any(_answerable(message) for message in batch)
    return Heard(batch, lines, notes, nothing_else)


def _answerable(message: InboundMessage) -> bool:
    """Whether the model has anything of it to read: text, a button, a file, a voice heard."""
    if message.text.strip() or message.action is not None or message.attachments:
        return True
    return any(not isinstance(p, AudioPart) or p.transcript is not None for p in message.parts)


def shortened(transcript: str) -> str:
    """One line, cut at a word near `HEARD_MAX_CHARS`."""
    text = " ".join(transcript.split())
    if len(text) <= HEARD_MAX_CHARS:
        return text
    cut = text[:HEARD_MAX_CHARS].rsplit(" ", 1)[0] or text[:HEARD_MAX_CHARS]
    return cut.rstrip(",.;:") + "…"
