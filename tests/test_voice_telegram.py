"""A Telegram voice note the whole way: the real aiogram client reads it from the fake Bot API, the
real `openai` SDK has the fake Whisper-compatible server transcribe it, the placeholder shows what
was heard, and the real `anthropic` SDK sends the words to the fake vendor as the user's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent.providers.anthropic import AnthropicProvider
from agent.providers.base import Provider
from agent.providers.scripted import Reply, ScriptedProvider
from bot.runtime.app import App
from content.parts import AudioPart
from content.texts import t
from tests.conftest import make_config
from tests.fake_anthropic import FakeAnthropic
from tests.fake_llm import Reply as VendorReply
from tests.fake_stt import FakeSTT
from tests.telegram_fake import TOKEN, FakeBotAPI

CHAT = 42
OGG = b"OggS\x00\x02" + bytes(range(256)) * 4  # what Telegram records: OGG/Opus
MP4 = b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00" + bytes(300)  # a video note
PERSONA = "---\nname: default\ndescription: answers\ntools: []\n---\nYou answer.\n"


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotAPI]:
    async with FakeBotAPI(interval_s=0) as api:
        yield api


@pytest.fixture
async def stt() -> AsyncIterator[FakeSTT]:
    async with FakeSTT() as server:
        yield server


def app_on(tmp_path: Path, fake: FakeBotAPI, provider: Provider, stt: FakeSTT | None) -> App:
    folder = tmp_path / "personas"
    folder.mkdir(exist_ok=True)
    (folder / "default.md").write_text(PERSONA)
    telegram = {"enabled": True, "token": TOKEN, "api_base": fake.url}
    sections: dict[str, Any] = {"stt": {"base_url": stt.url}} if stt is not None else {}
    config = make_config(
        tmp_path, channels={"telegram": telegram}, personas={"dirs": [str(folder)]}, **sections
    )
    return App(config, base_dir=tmp_path, provider=provider)


def voice_note(fake: FakeBotAPI, data: bytes, name: str) -> dict[str, Any]:
    file_id = fake.add_file(data, f"voice/{name}")
    return {
        "file_id": file_id,
        "file_unique_id": name,
        "duration": 2,
        "mime_type": "audio/ogg",
        "file_size": len(data),
    }


def texts_in(fake: FakeBotAPI) -> list[str]:
    return [call.text or "" for call in fake.ok(CHAT, "sendMessage", "editMessageText")]


async def test_a_voice_note_is_heard_shown_and_sent_to_the_vendor_as_words(
    tmp_path: Path, fake: FakeBotAPI, stt: FakeSTT
) -> None:
    stt.says(OGG, "what's the weather in Lisbon tomorrow")
    async with FakeAnthropic() as vendor:
        vendor.add(VendorReply(text=["Sunny, 24 °C."]))
        provider = AnthropicProvider(api_key="test-key", base_url=vendor.url, model="m")
        async with app_on(tmp_path, fake, provider, stt) as app:
            fake.push(fake.message(CHAT, None, voice=voice_note(fake, OGG, "v1.oga")))
            await vendor.wait_requests(1, timeout=30)
            await app.gateway.wait_idle()
    assert fake.downloads == ["voice/v1.oga"]
    [heard] = stt.requests
    assert (heard.filename, heard.content_type, heard.data) == ("voice.ogg", "audio/ogg", OGG)
    # the placeholder showed the words while the model worked, then became the answer
    shown = texts_in(fake)
    assert shown[0].startswith("🎙 heard: what's the weather in Lisbon tomorrow")
    assert shown[-1] == "Sunny, 24 °C."
    # the vendor read the words as the user's message, noted as spoken
    content = vendor.requests[0].body["messages"][-1]["content"]
    words = content if isinstance(content, str) else " ".join(b.get("text", "") for b in content)
    assert "(spoken; transcribed by speech-to-text:) what's the weather in Lisbon tomorrow" in words
    assert TOKEN not in words  # the download URL never reaches a model


async def test_a_video_note_is_transcribed_as_an_mp4(
    tmp_path: Path, fake: FakeBotAPI, stt: FakeSTT
) -> None:
    provider = ScriptedProvider([Reply("Hi.")])
    async with app_on(tmp_path, fake, provider, stt) as app:
        file_id = fake.add_file(MP4, "video_notes/n1.mp4")
        note = {"file_id": file_id, "file_unique_id": "n1", "length": 240, "duration": 3}
        fake.push(fake.message(CHAT, None, video_note=note | {"file_size": len(MP4)}))
        await fake.wait_for(lambda: "Hi." in texts_in(fake))
        await app.gateway.wait_idle()
    [heard] = stt.requests
    assert (heard.filename, heard.data) == ("voice.mp4", MP4)
    [part] = provider.requests[0].messages[-1].parts
    assert isinstance(part, AudioPart) and part.transcript == f"words of {len(MP4)} bytes"


async def test_without_stt_a_voice_note_is_told_and_not_answered(
    tmp_path: Path, fake: FakeBotAPI
) -> None:
    provider = ScriptedProvider([])
    async with app_on(tmp_path, fake, provider, None) as app:
        fake.push(fake.message(CHAT, None, voice=voice_note(fake, OGG, "v2.oga")))
        await fake.wait_for(lambda: t("en", "voice.off") in texts_in(fake))
        await app.gateway.wait_idle()
    assert provider.requests == []
    assert texts_in(fake)[-1] == t("en", "voice.off")


async def test_a_failing_service_is_told_and_the_caption_answered(
    tmp_path: Path, fake: FakeBotAPI, stt: FakeSTT
) -> None:
    stt.fail_next(503, 503)
    provider = ScriptedProvider([Reply("Here is the menu.")])
    async with app_on(tmp_path, fake, provider, stt) as app:
        note = voice_note(fake, OGG, "v3.oga")
        fake.push(fake.message(CHAT, None, voice=note, caption="and the menu please"))
        await fake.wait_for(lambda: "Here is the menu." in texts_in(fake))
        await app.gateway.wait_idle()
    assert len(stt.requests) == 2  # one retry
    reason = "the speech-to-text service failed (HTTP 503); try again later"
    assert t("en", "voice.not_transcribed", reason=reason) in texts_in(fake)
    assert provider.requests[0].messages[-1].content == "and the menu please"
