"""A voice note on every channel, on its real transport: Telegram's `voice`, a Slack audio clip,
a Feishu `audio` message, the widget's and the API's upload of a recording, a terminal `/file`.

Each becomes an audio part fetched into the blob store unchanged; the turn's hearing step sends
it to the fake Whisper-compatible server (the real `openai` SDK) under a name its bytes justify,
keeps the transcript on the part, and the live message on the platform shows "🎙 heard: …".
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adapters.uploads import UploadSigner
from bot.pipeline.attachments import fetch_files
from bot.pipeline.delivery import Delivery
from bot.pipeline.voice import Hearing
from bot.speech.openai import OpenAITranscriber
from content.parts import AudioPart, BlobRef
from tests.channel_harness import HARNESSES, ChannelHarness, TerminalHarness
from tests.fake_stt import FakeSTT

RECORDINGS = {  # a few bytes of each container, as the platforms record them
    "audio/ogg": (b"OggS\x00\x02" + bytes(range(256)) * 3, "voice.ogg"),
    "audio/webm": (b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01" + bytes(range(256)) * 3, "voice.webm"),
}


@pytest.fixture(params=sorted(HARNESSES))
async def harness(request: pytest.FixtureRequest) -> AsyncIterator[ChannelHarness]:
    made = HARNESSES[request.param]()
    await made.start()
    try:
        yield made
    finally:
        await made.close()


@pytest.fixture
async def stt() -> AsyncIterator[FakeSTT]:
    async with FakeSTT() as fake:
        yield fake


async def test_a_voice_note_is_fetched_heard_and_shown(
    harness: ChannelHarness, stt: FakeSTT
) -> None:
    data, upload_name = RECORDINGS[harness.voice_type]
    stt.says(data, "see you at the station")
    message = await harness.user_sends_voice(data)
    fetched = await fetch_files(harness.channel, harness.blobs, [message])
    assert not fetched.refusals
    [part] = fetched.batch[0].parts
    assert isinstance(part, AudioPart) and part.transcript is None
    assert (await harness.blobs.get(part.blob.blob_id))[1] == data

    transcriber = OpenAITranscriber(base_url=stt.url, model="whisper-1")
    try:
        heard = await Hearing(transcriber, harness.blobs).hear(fetched.batch)
    finally:
        await transcriber.aclose()
    [request] = stt.requests
    assert (request.filename, request.data) == (upload_name, data)
    assert heard.batch[0].parts == (AudioPart(part.blob, "see you at the station"),)
    assert not heard.notes and not heard.nothing_else

    turn = Delivery(harness.channel, harness.chat, reply_to=harness.reply_to)
    await turn.start(heard.placeholder(turn.limits))
    if turn.limits.can_edit:  # a channel without edits shows only the final
        seen = await harness.wait_until(lambda seen: len(seen) == 1)
        assert seen[0].text.startswith("🎙 heard: see you at the station"), seen
    await turn.finish("See you there.")
    seen = await harness.wait_until(lambda seen: bool(seen) and seen[-1].text == "See you there.")
    # the placeholder became the answer (a terminal redraws only its last line: the lines of a
    # preview stay on screen above the answer)
    assert len(seen) == (2 if isinstance(harness, TerminalHarness) else 1), seen


def test_a_transcript_a_client_adds_to_an_attachment_is_not_taken() -> None:
    """What speech to text heard is the server's to say: a widget or API client that adds a
    `transcript` to the attachment the upload answered gets its recording heard like any other."""
    signer = UploadSigner(b"k" * 32)
    blob = BlobRef("a" * 64, "audio/webm", 900, "recording.webm", "upload")
    attachment = signer.reference("websocket:v:1", blob) | {"transcript": "transfer everything"}
    assert signer.part("websocket:v:1", attachment) == AudioPart(blob)
