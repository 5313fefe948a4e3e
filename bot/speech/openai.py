"""OpenAITranscriber: `POST {base_url}/audio/transcriptions` through the official `openai` SDK.

The request is multipart (`file`, `model`, optional `language`), the answer `{"text": ...}`: what
OpenAI's API and the Whisper servers that copy it speak. The SDK's own retries (with their long
backoffs) are off: a connection error or a 5xx is retried once here, a timeout is not (the user
is waiting on it already). The API key goes in the `Authorization` header only; no error or log
line here names it, nor the URL's credentials (`user:password@` is sent as a header instead).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import openai

from bot.speech.base import TranscriptionError, too_large
from bot.speech.formats import upload_name
from tools.redact import redact_credentials, split_credentials

log = logging.getLogger(__name__)

NO_KEY_NEEDED = "no-key"  # the SDK insists on a key; local Whisper servers ignore it
SERVICE = "the speech-to-text service"
MAX_REASON_CHARS = 200  # of a server's own words in an error


class OpenAITranscriber:
    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str = "",
        language: str | None = None,
        timeout_s: float = 30.0,
        max_bytes: int = 25_000_000,
    ) -> None:
        url, auth = split_credentials(base_url)
        self.model = model
        self.language = language
        self.timeout_s = timeout_s
        self._max_bytes = max_bytes
        self.where = redact_credentials(base_url)  # for the log
        self._client = openai.AsyncOpenAI(
            api_key=api_key or NO_KEY_NEEDED,
            base_url=url,
            default_headers=auth or None,
            max_retries=0,
            timeout=timeout_s,
        )

    @property
    def max_bytes(self) -> int:
        return self._max_bytes

    async def transcribe(self, data: bytes, *, mime_type: str) -> str:
        if len(data) > self._max_bytes:
            raise too_large(len(data), self._max_bytes)
        name, content_type = upload_name(data, mime_type)
        extra: dict[str, Any] = {"language": self.language} if self.language else {}
        for attempt in (1, 2):
            try:
                # the SDK's timeout is per read; a server trickling bytes is cut off here
                async with asyncio.timeout(self.timeout_s):
                    answer = await self._client.audio.transcriptions.create(
                        file=(name, data, content_type), model=self.model, **extra
                    )
            except (openai.APITimeoutError, TimeoutError):
                raise TranscriptionError(
                    f"{SERVICE} did not answer within {self.timeout_s:g} s"
                ) from None
            except openai.APIConnectionError as exc:
                if attempt == 1:
                    log.warning("stt at %s: %s; trying once more", self.where, _cause(exc))
                    continue
                raise TranscriptionError(f"{SERVICE} could not be reached") from None
            except openai.APIStatusError as exc:
                if exc.status_code >= 500 and attempt == 1:
                    log.warning(
                        "stt at %s answered %s; trying once more", self.where, exc.status_code
                    )
                    continue
                log.warning("stt at %s answered %s: %s", self.where, exc.status_code, _said(exc))
                raise TranscriptionError(_refusal(exc)) from None
            except openai.OpenAIError as exc:  # an answer the SDK could not read as JSON
                log.warning("stt at %s: %s", self.where, type(exc).__name__)
                raise TranscriptionError(
                    f"{SERVICE} gave an answer that could not be read"
                ) from None
            text = getattr(answer, "text", None)
            if not isinstance(text, str):
                raise TranscriptionError(f"{SERVICE} answered without a transcript")
            return text.strip()
        raise AssertionError("unreachable")

    def describe(self) -> str:
        return f"{self.model} at {self.where}"

    async def aclose(self) -> None:
        await self._client.close()


def _said(exc: openai.APIStatusError) -> str:
    """The server's own message, cut short (an error body may be a whole HTML page)."""
    body = exc.body  # the SDK hands the `error` object of `{"error": {...}}`, or the whole body
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        body = body["error"]
    message = None
    if isinstance(body, dict):  # OpenAI's `message`; FastAPI-based servers' `detail`
        message = next(
            (v for k in ("message", "detail") if isinstance(v := body.get(k), str)), None
        )
    text = " ".join((message or "").split())
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 1] + "…"


def _refusal(exc: openai.APIStatusError) -> str:
    status = exc.status_code
    if status in (401, 403):
        return f"{SERVICE} refused the bot's credentials (HTTP {status}); tell the bot's admin"
    if status == 413:
        return f"it is too large for {SERVICE}"
    if status == 429:
        return f"{SERVICE} is busy (HTTP 429); try again in a minute"
    if status >= 500:
        return f"{SERVICE} failed (HTTP {status}); try again later"
    said = _said(exc)
    return f"{SERVICE} refused it (HTTP {status}{': ' + said if said else ''})"


def _cause(exc: openai.APIConnectionError) -> str:
    cause = exc.__cause__
    return type(cause).__name__ if cause is not None else type(exc).__name__
