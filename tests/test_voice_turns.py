"""Voice notes through the running app: heard by the fake Whisper-compatible server (the real
`openai` SDK), shown in the live message, read by the model, kept with their part.

The messages carry their audio as parts already in the blob store, as the widget and the API
hand them over (the channels' own voice kinds: tests/test_channel_voice.py, tests/test_voice_telegram.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.base import ChannelLimits, ChatRef, InboundMessage
from agent.providers.scripted import Reply, ScriptedProvider
from bot.pipeline.transcript import StoreHistory
from bot.pipeline.voice import Heard, shortened
from bot.runtime.app import App
from content.parts import AudioPart, Part, describe
from content.texts import t
from tests.conftest import make_config
from tests.fake_stt import FakeSTT
from tests.fakes import RecordingChannel

CHAT = ChatRef("fake", "dm-u1")
OGG = b"OggS\x00\x02" + b"one" * 40
OGG2 = b"OggS\x00\x02" + b"two" * 40
OGG3 = b"OggS\x00\x02" + b"three" * 40
PERSONA = "---\nname: default\ndescription: Test coordinator.\ntools: []\n---\nBe brief.\n"


@pytest.fixture
async def stt() -> AsyncIterator[FakeSTT]:
    async with FakeSTT() as fake:
        yield fake


@contextlib.asynccontextmanager
async def running(
    folder: Path,
    provider: ScriptedProvider,
    stt: FakeSTT | None,
    tools: dict[str, Any] | None = None,
    **settings: Any,
) -> AsyncIterator[tuple[App, RecordingChannel]]:
    folder.mkdir(exist_ok=True)
    personas = folder / "personas"
    personas.mkdir(exist_ok=True)
    (personas / "default.md").write_text(PERSONA)
    sections: dict[str, Any] = {"personas": {"dirs": [str(personas)]}, "tools": tools or {}}
    if stt is not None:
        sections["stt"] = {"base_url": stt.url, **settings}
    channel = RecordingChannel(ChannelLimits(max_text_length=2000, min_edit_interval_s=0.05))
    app = App(
        make_config(folder, **sections),
        base_dir=folder,
        provider=provider,
        channels=[channel],
        web_server=False,
    )
    async with app:
        yield app, channel


async def voice(app: App, *recordings: bytes) -> tuple[AudioPart, ...]:
    return tuple(
        [
            AudioPart(await app.blobs.put(data, mime_type="audio/ogg", source="upload"))
            for data in recordings
        ]
    )


def message(text: str, event: str, parts: tuple[Part, ...] = ()) -> InboundMessage:
    return InboundMessage(CHAT, "u1", text, event, f"m-{event}", parts=parts)


def sent(channel: RecordingChannel) -> list[str]:
    """The texts of the messages the bot posted, in order (not their edits)."""
    return [call.text for call in channel.calls if call.kind == "send"]


async def test_a_voice_note_is_heard_shown_read_by_the_model_and_kept(
    tmp_path: Path, stt: FakeSTT
) -> None:
    stt.says(OGG, "book a table for two at eight")
    provider = ScriptedProvider([Reply("Booked for eight.")])
    async with running(tmp_path, provider, stt) as (app, channel):
        [note] = await voice(app, OGG)
        await app.gateway.handle(message("", "e1", (note,)))
        await app.gateway.wait_idle()
        stored = await StoreHistory(app.store, lambda: "default").recent(CHAT, "u1")
    [request] = stt.requests
    assert (request.filename, request.data, request.model) == ("voice.ogg", OGG, "whisper-1")
    # the live message showed what was heard while the model worked, then became the answer
    assert sent(channel)[0] == "🎙 heard: book a table for two at eight\n\nThinking…"
    assert channel.shown() == ["Booked for eight."]
    # the model read the words, noted as spoken
    [user] = [m for m in provider.requests[0].messages if m.role == "user"]
    [part] = user.parts
    assert isinstance(part, AudioPart) and part.transcript == "book a table for two at eight"
    assert "(spoken; transcribed by speech-to-text:) book a table for two at eight" in describe(
        part
    )
    # kept with its part: the transcript a reload shows
    assert stored[0].parts == (part,)


async def test_later_turns_and_a_restart_read_the_kept_transcript_without_asking_again(
    tmp_path: Path, stt: FakeSTT
) -> None:
    stt.says(OGG, "remind me about the dentist")
    first = ScriptedProvider([Reply("Noted."), Reply("The dentist.")])
    async with running(tmp_path, first, stt) as (app, _):
        [note] = await voice(app, OGG)
        await app.gateway.handle(message("", "e1", (note,)))
        await app.gateway.wait_idle()
        await app.gateway.handle(message("what was it?", "e2"))
        await app.gateway.wait_idle()
    later = ScriptedProvider([Reply("Still the dentist.")])
    async with running(tmp_path, later, stt) as (app, _):  # a restart on the same database
        await app.gateway.handle(message("and again?", "e3"))
        await app.gateway.wait_idle()
    assert len(stt.requests) == 1
    for request in (first.requests[1], later.requests[0]):
        [kept] = request.messages[0].parts
        assert isinstance(kept, AudioPart) and kept.transcript == "remind me about the dentist"


async def test_several_voice_notes_are_all_heard_at_once_within_the_bound(
    tmp_path: Path, stt: FakeSTT
) -> None:
    for data, words in ((OGG, "first"), (OGG2, "second"), (OGG3, "third")):
        stt.says(data, words)
    provider = ScriptedProvider([Reply("All three.")])
    async with running(tmp_path, provider, stt, concurrency=2) as (app, channel):
        notes = await voice(app, OGG, OGG2, OGG3)
        stt.hold()
        await app.gateway.handle(message("", "e1", notes))
        await stt.wait_for(lambda: stt.in_flight == 2)  # two at once, not one after another
        stt.release()
        await app.gateway.wait_idle()
    assert stt.most_in_flight == 2 and len(stt.requests) == 3
    [user] = [m for m in provider.requests[0].messages if m.role == "user"]
    heard = [p.transcript for p in user.parts if isinstance(p, AudioPart)]
    assert heard == ["first", "second", "third"]  # in the order they were sent
    assert sent(channel)[0] == "🎙 heard: first\n🎙 heard: second\n🎙 heard: third\n\nThinking…"


async def test_without_stt_the_user_is_told_once_per_message_and_voice_alone_is_not_answered(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider([Reply("Here is the forecast.")])
    async with running(tmp_path, provider, None) as (app, channel):
        notes = await voice(app, OGG, OGG2)
        await app.gateway.handle(message("", "e1", notes))
        await app.gateway.wait_idle()
        assert provider.requests == []  # voice alone: no model call
        assert channel.shown() == [t("en", "voice.off")]
        await app.gateway.handle(message("and the weather?", "e2", notes[:1]))
        await app.gateway.wait_idle()
    assert channel.shown().count(t("en", "voice.off")) == 2  # once per message, not per note
    assert channel.shown()[-1] == "Here is the forecast."
    user = provider.requests[0].messages[-1]
    assert user.content == "and the weather?"
    assert user.parts == notes[:1]  # kept, unheard: the model reads it is an audio file


async def test_a_failed_transcription_is_told_and_the_rest_is_answered(
    tmp_path: Path, stt: FakeSTT
) -> None:
    stt.fail_next(500, 500)
    provider = ScriptedProvider([Reply("The shop opens at nine."), Reply("Hello again.")])
    async with running(tmp_path, provider, stt) as (app, channel):
        [note] = await voice(app, OGG)
        await app.gateway.handle(message("when does the shop open?", "e1", (note,)))
        await app.gateway.wait_idle()
        told = t(
            "en",
            "voice.not_transcribed",
            reason="the speech-to-text service failed (HTTP 500); try again later",
        )
        assert channel.shown() == [told, "The shop opens at nine."]
        assert provider.requests[0].messages[-1].content == "when does the shop open?"
        # voice alone, and silence heard: the reason is the whole answer, no model call
        stt.says(OGG2, "   ")
        [silent] = await voice(app, OGG2)
        await app.gateway.handle(message("", "e2", (silent,)))
        await app.gateway.wait_idle()
        assert len(provider.requests) == 1
        assert channel.shown()[-1] == t(
            "en", "voice.not_transcribed", reason=t("en", "voice.nothing_heard")
        )
        await app.gateway.handle(message("hello?", "e3"))  # nothing crashed
        await app.gateway.wait_idle()
        assert app.ops.metrics is not None
        counted = app.ops.metrics.render().decode()
    assert channel.shown()[-1] == "Hello again."
    assert 'gateway_transcriptions_total{outcome="failed"} 1.0' in counted
    assert 'gateway_transcriptions_total{outcome="silent"} 1.0' in counted
    assert "gateway_transcription_seconds_count 2.0" in counted


async def test_a_voice_note_over_the_cap_is_not_sent(tmp_path: Path, stt: FakeSTT) -> None:
    provider = ScriptedProvider([])
    async with running(tmp_path, provider, stt, max_bytes=100) as (app, channel):
        [note] = await voice(app, OGG)
        await app.gateway.handle(message("", "e1", (note,)))
        await app.gateway.wait_idle()
    assert stt.requests == [] and provider.requests == []
    reason = "it is 126 B, over the 100 B speech-to-text takes"
    assert channel.shown() == [t("en", "voice.not_transcribed", reason=reason)]


async def test_a_resumed_turn_does_not_transcribe_again(tmp_path: Path, stt: FakeSTT) -> None:
    """A process dies while the model answers a voice note; the next one resumes the turn from
    what was recorded, transcript included: the service is not asked a second time."""
    stt.says(OGG, "cancel my order")
    hang = ScriptedProvider([Reply("never", wait=asyncio.Event())])
    async with running(tmp_path / "a", hang, stt) as (app, _):
        [note] = await voice(app, OGG)
        await app.gateway.handle(message("", "e1", (note,)))
        await asyncio.wait_for(hang.wait_requests(1), 10)
        (tmp_path / "b").mkdir()
        with (
            contextlib.closing(sqlite3.connect(tmp_path / "a" / "bot.db")) as source,
            contextlib.closing(sqlite3.connect(tmp_path / "b" / "bot.db")) as target,
        ):
            source.backup(target)  # what a kill -9 would leave: the committed state
    resumed = ScriptedProvider([Reply("Order cancelled.")])
    async with running(tmp_path / "b", resumed, stt) as (app, channel):
        await asyncio.wait_for(resumed.wait_requests(1), 10)
        await app.gateway.wait_idle()
    assert len(stt.requests) == 1
    [user] = [m for m in resumed.requests[0].messages if m.role == "user"]
    [part] = user.parts
    assert isinstance(part, AudioPart) and part.transcript == "cancel my order"
    assert "Order cancelled." in [call.text for call in channel.calls]


async def test_with_mask_user_text_the_model_and_the_history_read_the_transcript_masked(
    tmp_path: Path, stt: FakeSTT
) -> None:
    """Spoken personal data is masked like typed data; the speaker sees their own words."""
    stt.says(OGG, "write to ann@example.com please")
    provider = ScriptedProvider([Reply("Done.")])
    async with running(tmp_path, provider, stt, tools={"pii": {"mask_user_text": True}}) as (
        app,
        channel,
    ):
        [note] = await voice(app, OGG)
        await app.gateway.handle(message("", "e1", (note,)))
        await app.gateway.wait_idle()
        stored = await StoreHistory(app.store, lambda: "default").recent(CHAT, "u1")
    [part] = provider.requests[0].messages[-1].parts
    assert isinstance(part, AudioPart) and part.transcript == "write to [email] please"
    assert stored[0].parts == (part,)
    assert sent(channel)[0].startswith("🎙 heard: write to ann@example.com please")


def test_the_live_message_shortens_long_transcripts_and_fits_the_channel() -> None:
    long = "word " * 200
    heard = Heard([], (t("en", "voice.heard", transcript=shortened(long)),) * 3)
    line = heard.lines[0]
    assert len(line) < 300 and line.endswith("word…")
    roomy = ChannelLimits(max_text_length=4096)
    assert heard.placeholder(roomy) == "\n".join(heard.lines) + "\n\nThinking…"
    tight = ChannelLimits(max_text_length=700)
    assert heard.placeholder(tight) == f"{line}\n{line}\n🎙 … and 1 more\n\nThinking…"
    assert heard.placeholder(ChannelLimits(max_text_length=100)) == "Thinking…"
