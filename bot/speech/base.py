"""The `Transcriber` seam: audio bytes in, the words spoken out.

One implementation: `OpenAITranscriber` (bot/speech/openai.py), for OpenAI's API and every
server that speaks its `/audio/transcriptions` (faster-whisper servers, whisper.cpp, vLLM,
LocalAI …). No model runs in this process: no weights are downloaded at run time.
"""

from __future__ import annotations

from typing import Final, Literal, Protocol

from content.parts import size_text

# how a voice note's transcription ended: `silent` (no words heard), `failed` (the service),
# `too_large` (over stt.max_bytes, never sent), `unread` (its blob is gone), `off` (no stt)
SpeechOutcome = Literal["ok", "silent", "failed", "too_large", "unread", "off"]


class TranscriptionError(Exception):
    """A voice note not transcribed. The message is the reason as its sender reads it ("the
    speech-to-text service did not answer within 30 s"): it names no URL and no key."""


def too_large(size: int, limit: int) -> TranscriptionError:
    """The error for a recording over the transcriber's cap (never sent)."""
    return TranscriptionError(
        f"it is {size_text(size)}, over the {size_text(limit)} speech-to-text takes"
    )


class Transcriber(Protocol):
    @property
    def max_bytes(self) -> int:
        """The largest recording sent; a larger one is refused without a request."""
        ...

    async def transcribe(self, data: bytes, *, mime_type: str) -> str:
        """The words spoken in `data` (stripped; "" when none were heard);
        `TranscriptionError` when the service cannot say."""
        ...

    def describe(self) -> str:
        """The model and server, for the log (no credentials)."""
        ...

    async def aclose(self) -> None: ...


class SpeechObserver(Protocol):
    """Told of every voice note heard or not (the app's metrics)."""

    def transcription(self, outcome: SpeechOutcome, seconds: float) -> None: ...


class _Unobserved:
    def transcription(self, outcome: SpeechOutcome, seconds: float) -> None:
        pass


UNOBSERVED: Final[SpeechObserver] = _Unobserved()
