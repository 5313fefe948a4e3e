"""The transcription client: the real `openai` SDK against the fake Whisper-compatible server.

What the server received (the multipart file name, type and bytes, the model, the key), one
retry on a 5xx or a dropped connection and none on a timeout, the size cap checked before any
request, and errors that say why in the user's words without the key or the URL's password.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from bot.speech.base import TranscriptionError
from bot.speech.formats import sniffed_extension, upload_name
from bot.speech.openai import OpenAITranscriber
from tests.fake_stt import FakeSTT

KEY = "sk-stt-secret-key-123"
OGG = b"OggS\x00\x02" + bytes(range(200))
WEBM = b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01" + bytes(100)
M4A = b"\x00\x00\x00\x20ftypM4A \x00\x00\x00\x00" + bytes(64)
MP4 = b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00" + bytes(64)


@pytest.fixture
async def stt() -> AsyncIterator[FakeSTT]:
    async with FakeSTT() as fake:
        yield fake


def client(fake: FakeSTT, **options: object) -> OpenAITranscriber:
    settings: dict[str, object] = {"model": "whisper-1", "api_key": KEY, "timeout_s": 5.0}
    return OpenAITranscriber(base_url=fake.url, **(settings | options))  # type: ignore[arg-type]


async def test_the_recording_goes_as_multipart_and_the_text_comes_back(stt: FakeSTT) -> None:
    stt.says(OGG, "  call me back at five  ")
    transcriber = client(stt, language="en")
    try:
        assert await transcriber.transcribe(OGG, mime_type="audio/ogg") == "call me back at five"
    finally:
        await transcriber.aclose()
    [seen] = stt.requests
    assert (seen.filename, seen.content_type, seen.data) == ("voice.ogg", "audio/ogg", OGG)
    assert (seen.model, seen.language) == ("whisper-1", "en")
    assert seen.authorization == f"Bearer {KEY}"


async def test_the_file_name_follows_the_bytes_not_the_label(stt: FakeSTT) -> None:
    """A Slack clip labelled audio/ogg that is WebM goes as .webm: Whisper decodes by the name."""
    transcriber = client(stt)
    try:
        await transcriber.transcribe(WEBM, mime_type="audio/ogg")
        await transcriber.transcribe(MP4, mime_type="application/octet-stream")
    finally:
        await transcriber.aclose()
    names = [(seen.filename, seen.content_type) for seen in stt.requests]
    assert names == [("voice.webm", "audio/webm"), ("voice.mp4", "video/mp4")]


def test_container_sniffing() -> None:
    assert [sniffed_extension(d) for d in (OGG, WEBM, M4A, MP4)] == ["ogg", "webm", "m4a", "mp4"]
    assert sniffed_extension(b"RIFF\x24\x00\x00\x00WAVEfmt ") == "wav"
    assert sniffed_extension(b"fLaC\x00\x00\x00\x22") == "flac"
    assert sniffed_extension(b"ID3\x04\x00") == "mp3"
    assert sniffed_extension(b"\xff\xfb\x90\x00") == "mp3"  # an MPEG layer III frame
    assert sniffed_extension(b"\xff\xf1\x50\x80") is None  # ADTS AAC: same sync, no layer
    assert sniffed_extension(b"%PDF-1.4") is None
    # nothing in the bytes: the stored type names it; nothing there either: no extension
    assert upload_name(b"????", "audio/mpeg") == ("voice.mp3", "audio/mpeg")
    assert upload_name(b"????", "audio/opus") == ("voice.ogg", "audio/opus")
    assert upload_name(b"????", "application/octet-stream") == (
        "voice",
        "application/octet-stream",
    )


async def test_a_5xx_is_retried_once(stt: FakeSTT) -> None:
    stt.fail_next(503)
    stt.says(OGG, "second time lucky")
    transcriber = client(stt)
    try:
        assert await transcriber.transcribe(OGG, mime_type="audio/ogg") == "second time lucky"
        stt.fail_next(500, 502)
        with pytest.raises(TranscriptionError, match=r"failed \(HTTP 502\)"):
            await transcriber.transcribe(OGG, mime_type="audio/ogg")
    finally:
        await transcriber.aclose()
    assert len(stt.requests) == 4  # 2 + 2: never a third try


async def test_a_dropped_connection_is_retried_once(stt: FakeSTT) -> None:
    stt.fail_next("drop")
    transcriber = client(stt)
    try:
        assert await transcriber.transcribe(OGG, mime_type="audio/ogg") == "words of 206 bytes"
        stt.fail_next("drop", "drop")
        with pytest.raises(TranscriptionError, match="could not be reached"):
            await transcriber.transcribe(OGG, mime_type="audio/ogg")
    finally:
        await transcriber.aclose()
    assert len(stt.requests) == 4


async def test_a_timeout_is_not_retried(stt: FakeSTT) -> None:
    stt.fail_next("hang")
    transcriber = client(stt, timeout_s=0.2)
    try:
        with pytest.raises(TranscriptionError, match=r"did not answer within 0\.2 s"):
            await transcriber.transcribe(OGG, mime_type="audio/ogg")
    finally:
        await transcriber.aclose()
    assert len(stt.requests) == 1


async def test_a_refusal_says_why_and_is_not_retried(stt: FakeSTT) -> None:
    transcriber = client(stt)
    try:
        stt.fail_next(400)
        with pytest.raises(TranscriptionError, match=r"HTTP 400: scripted failure 400"):
            await transcriber.transcribe(OGG, mime_type="audio/ogg")
        stt.fail_next(401)
        with pytest.raises(TranscriptionError, match="credentials") as refused:
            await transcriber.transcribe(OGG, mime_type="audio/ogg")
    finally:
        await transcriber.aclose()
    assert len(stt.requests) == 2
    assert KEY not in str(refused.value)


async def test_a_recording_over_the_cap_is_not_sent(stt: FakeSTT) -> None:
    transcriber = client(stt, max_bytes=100)
    try:
        with pytest.raises(TranscriptionError, match=r"it is \d+ B, over the 100 B"):
            await transcriber.transcribe(OGG, mime_type="audio/ogg")
    finally:
        await transcriber.aclose()
    assert stt.requests == []


async def test_no_key_and_no_password_reach_the_log(
    stt: FakeSTT, caplog: pytest.LogCaptureFixture
) -> None:
    """Failures are logged with the server's address; the key and a URL's password never."""
    caplog.set_level(logging.DEBUG)
    url = stt.url.replace("http://", "http://stt-user:url-password-9@")
    transcriber = OpenAITranscriber(base_url=url, model="whisper-1", api_key=KEY)
    try:
        stt.fail_next(500, 500, "drop", "drop", 401)
        for _ in range(3):
            with pytest.raises(TranscriptionError) as failed:
                await transcriber.transcribe(OGG, mime_type="audio/ogg")
            assert KEY not in str(failed.value) and "url-password-9" not in str(failed.value)
        assert transcriber.describe() == f"whisper-1 at {stt.url.replace('http://', 'http://***@')}"
    finally:
        await transcriber.aclose()
    assert stt.requests[0].authorization is not None  # the URL's user:password as a header
    logged = caplog.text
    assert "stt at http://***@127.0.0.1" in logged
    assert KEY not in logged and "url-password-9" not in logged
