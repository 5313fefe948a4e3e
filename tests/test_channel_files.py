"""What each channel's files get right beyond the contract's round trip: the platforms' quirks
(Telegram's token in its file URLs, Slack's login page and Slack Connect, Feishu's post images),
photo or document by size and type, the refusal the user is told, and `send_parts`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from adapters.base import Attachment, ChannelError, ChatRef, InboundMessage
from adapters.feishu import FeishuChannel
from adapters.feishu.normalize import normalize as feishu_normalize
from adapters.slack import SlackChannel
from adapters.telegram import TelegramChannel
from bot.pipeline.attachments import fetch_files, send_parts, tell_refusals
from bot.pipeline.delivery import Delivery
from content.parts import AudioPart, BlobRef, FilePart, ImagePart, MediaPart
from tests.blob_kit import MemoryBlobs
from tests.feishu_events import message_event
from tests.feishu_fake import APP_ID, APP_SECRET, BOT_OPEN_ID, FakeFeishu
from tests.slack_fake import BOT_TOKEN, FakeSlack
from tests.telegram_fake import TOKEN, FakeBotAPI

PNG = b"\x89PNG\r\n\x1a\n" + bytes(300)
CHAT = 42


@pytest.fixture
async def telegram() -> AsyncIterator[tuple[FakeBotAPI, TelegramChannel]]:
    async with FakeBotAPI(interval_s=0) as fake:
        channel = TelegramChannel(token=TOKEN, api_base=fake.url, request_timeout_s=2)
        try:
            yield fake, channel
        finally:
            await channel.aclose()


def telegram_message(*attachments: Attachment) -> InboundMessage:
    chat = ChatRef("telegram", str(CHAT))
    return InboundMessage(chat, "7", "see these", "telegram:1", "500", attachments=attachments)


async def test_a_refused_file_is_told_to_its_sender_and_the_rest_is_read(
    telegram: tuple[FakeBotAPI, TelegramChannel],
) -> None:
    fake, channel = telegram
    small = fake.add_file(PNG, "photos/small.png")
    big = fake.add_file(bytes(5000), "documents/big.bin")
    message = telegram_message(
        Attachment("photo", mime_type="image/png", size=len(PNG), platform_id=small),
        Attachment("document", name="big.bin", size=5000, platform_id=big),
    )
    blobs = MemoryBlobs(max_bytes=1000)
    fetched = await fetch_files(channel, blobs, [message])
    [read] = fetched.batch
    assert [type(p) for p in read.parts] == [ImagePart]
    assert [a.name for a in read.attachments] == ["big.bin"]  # still named to the model
    await tell_refusals(channel, fetched.refusals)
    [reply] = fake.ok(CHAT, "sendMessage")
    assert reply.text is not None and "“big.bin”" in reply.text and "1 KB" in reply.text
    assert reply.params["reply_parameters"]["message_id"] == 500
    assert fake.downloads == ["photos/small.png"]  # the big one was never asked for


async def test_telegrams_token_is_never_in_a_download_error(
    telegram: tuple[FakeBotAPI, TelegramChannel],
) -> None:
    fake, channel = telegram
    file_id = fake.add_file(PNG, "photos/x.png")
    fake.files_gone = True
    attachment = Attachment("photo", size=len(PNG), platform_id=file_id)
    with pytest.raises(ChannelError) as raised:
        await channel.fetch(telegram_message(attachment), attachment, MemoryBlobs())
    assert "404" in str(raised.value)
    for text in (str(raised.value), repr(raised.value.__cause__), repr(raised.value.__context__)):
        assert TOKEN not in text


@pytest.mark.parametrize(
    ("part", "method"),
    [
        (ImagePart(BlobRef("", "image/png", len(PNG), "chart.png")), "sendphoto"),
        (ImagePart(BlobRef("", "image/svg+xml", len(PNG), "logo.svg")), "senddocument"),
        (AudioPart(BlobRef("", "audio/ogg", len(PNG), "note.ogg")), "sendvoice"),
        (AudioPart(BlobRef("", "audio/mpeg", len(PNG), "song.mp3")), "sendaudio"),
        (FilePart(BlobRef("", "application/pdf", len(PNG), "a.pdf")), "senddocument"),
    ],
)
async def test_telegram_sends_each_part_the_way_telegram_shows_it(
    telegram: tuple[FakeBotAPI, TelegramChannel], part: MediaPart, method: str
) -> None:
    fake, channel = telegram
    blobs = MemoryBlobs()
    stored = await blobs.put(PNG, mime_type=part.blob.mime_type, name=part.blob.name)
    kept = replace(part, blob=stored)
    chat = ChatRef("telegram", str(CHAT))
    await channel.send_part(chat, kept, blobs, caption="Here", reply_to="500")
    [upload] = fake.uploads
    assert (upload.method, upload.name, upload.data, upload.caption) == (
        method,
        part.blob.name,
        PNG,
        "Here",
    )


async def test_send_parts_tells_what_could_not_be_sent(
    telegram: tuple[FakeBotAPI, TelegramChannel],
) -> None:
    fake, channel = telegram
    blobs = MemoryBlobs()
    kept = ImagePart(await blobs.put(PNG, mime_type="image/png", name="chart.png"))
    lost = FilePart(BlobRef("0" * 64, "application/pdf", 10, "gone.pdf"))  # not in the store
    chat = ChatRef("telegram", str(CHAT))
    failed = await send_parts(channel, chat, [kept, lost], blobs, reply_to="500")
    assert failed == ["(The file “gone.pdf” could not be sent.)"]
    assert [u.name for u in fake.uploads] == ["chart.png"]


# --- Slack ---------------------------------------------------------------------------------


@pytest.fixture
async def slack() -> AsyncIterator[tuple[FakeSlack, SlackChannel]]:
    fake = FakeSlack()
    await fake.start()
    channel = SlackChannel(bot_token=BOT_TOKEN, api_base=fake.url, request_timeout_s=2)
    try:
        yield fake, channel
    finally:
        await channel.aclose()
        await fake.close()


def slack_message() -> InboundMessage:
    return InboundMessage(ChatRef("slack", "C1", "1.0"), "U1", "", "slack:1", "1.0")


async def test_slack_without_files_read_is_named_not_stored(
    slack: tuple[FakeSlack, SlackChannel],
) -> None:
    """Slack answers a file download without the scope with 200 and its login page."""
    fake, channel = slack
    shared = fake.add_file(PNG, "a.png", "image/png")
    url = shared["url_private"].replace("/files-pri/", "/files-pri/") + "?no-token"
    channel.client.token = "xoxb-without-files-read"  # the page, not an error, comes back
    attachment = Attachment("photo", "a.png", "image/png", len(PNG), url, shared["id"])
    blobs = MemoryBlobs()
    with pytest.raises(ChannelError, match="files:read"):
        await channel.fetch(slack_message(), attachment, blobs)
    assert not blobs.blobs


async def test_a_slack_connect_file_is_found_through_files_info(
    slack: tuple[FakeSlack, SlackChannel],
) -> None:
    fake, channel = slack
    shared = fake.add_file(PNG, "shared.png", "image/png")
    attachment = Attachment("photo", "shared.png", "image/png", platform_id=shared["id"])
    blobs = MemoryBlobs()
    blob = await channel.fetch(slack_message(), attachment, blobs)
    assert await blobs.get(blob.blob_id) == ("image/png", PNG)
    assert [c.method for c in fake.calls] == ["files.info"]


async def test_the_bot_token_goes_to_slack_only(slack: tuple[FakeSlack, SlackChannel]) -> None:
    fake, channel = slack
    attachment = Attachment("file", "x.bin", size=3, url="https://attacker.example/x.bin")
    with pytest.raises(ChannelError, match="off Slack"):
        await channel.fetch(slack_message(), attachment, MemoryBlobs())


# --- Feishu --------------------------------------------------------------------------------


async def test_a_feishu_posts_images_are_read_as_images() -> None:
    fake = FakeFeishu()
    await fake.start()
    try:
        channel = FeishuChannel(
            app_id=APP_ID, app_secret=APP_SECRET, domain=fake.url, request_timeout_s=2
        )
        message_id = fake.user_file("oc_p2p", PNG, "photo.png", kind="image")
        post = {
            "title": "",
            "content": [
                [{"tag": "text", "text": "look"}],
                [{"tag": "img", "image_key": f"img_{message_id}"}],
            ],
        }
        event = message_event(kind="post", content=post, message_id=message_id)
        made = feishu_normalize(event, BOT_OPEN_ID)
        assert isinstance(made, InboundMessage) and made.text == "look"
        blobs = MemoryBlobs()
        fetched = await fetch_files(channel, blobs, [made])
        [part] = fetched.batch[0].parts
        assert isinstance(part, ImagePart) and part.blob.name == "photo.png"
        assert (await blobs.get(part.blob.blob_id))[1] == PNG
        assert [c.body for c in fake.of("resource")] == [{"type": "image"}]
    finally:
        await fake.close()


async def test_an_answers_media_follow_its_final_text_and_a_lost_one_is_said(
    telegram: tuple[FakeBotAPI, TelegramChannel],
) -> None:
    fake, channel = telegram
    blobs = MemoryBlobs()
    chart = ImagePart(await blobs.put(PNG, mime_type="image/png", name="chart.png"))
    lost = FilePart(BlobRef("0" * 64, "application/pdf", 10, "gone.pdf"))
    delivery = Delivery(channel, ChatRef("telegram", str(CHAT)), reply_to="500", blobs=blobs)
    await delivery.finish("Your chart", parts=(chart, lost))
    texts = [call.text for call in fake.ok(CHAT, "sendMessage")]
    assert texts == ["Your chart", "(The file “gone.pdf” could not be sent.)"]
    [upload] = fake.uploads
    assert (upload.method, upload.name, upload.data) == ("sendphoto", "chart.png", PNG)
