"""What each channel's files get right beyond the contract's round trip: the platforms' quirks
(Telegram's token in its file URLs, Slack's login page and Slack Connect, Feishu's post images),
photo or document by size and type, the refusal the user is told, and `send_parts`."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from aiogram.types import Message as TelegramMessage
from PIL import Image

from adapters.base import Attachment, ChannelError, ChatRef, InboundMessage
from adapters.feishu import FeishuChannel
from adapters.feishu.normalize import normalize as feishu_normalize
from adapters.slack import SlackChannel
from adapters.slack.normalize import BotIdentity as SlackIdentity
from adapters.slack.normalize import message as slack_normalize
from adapters.telegram import TelegramChannel
from adapters.telegram.normalize import BotIdentity
from adapters.telegram.normalize import normalize as telegram_normalize
from bot.pipeline.attachments import fetch_files, send_parts, tell_refusals
from bot.pipeline.delivery import Delivery
from content.parts import AudioPart, BlobRef, FilePart, ImagePart, MediaPart, TextPart
from tests.blob_kit import MemoryBlobs, png
from tests.feishu_events import message_event
from tests.feishu_fake import APP_ID, APP_SECRET, BOT_OPEN_ID, FakeFeishu
from tests.slack_events import BOT_ID, BOT_USER, TEAM
from tests.slack_events import message as slack_event
from tests.slack_fake import BOT_TOKEN, FakeSlack
from tests.telegram_fake import TOKEN, FakeBotAPI

PNG = png(20, 10)
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


def wide(width: int, height: int) -> bytes:
    """A real PNG of one bit per pixel: big dimensions, few bytes."""
    buffer = io.BytesIO()
    Image.new("1", (width, height)).save(buffer, "PNG")
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("data", "method"),
    [
        (wide(2000, 50), "senddocument"),  # one side 40 times the other
        (wide(9000, 1500), "senddocument"),  # width + height over 10000
        (wide(4000, 4000), "sendphoto"),  # large, within every limit
        (b"\x89PNG\r\n\x1a\n but no image", "senddocument"),  # not readable as an image
    ],
)
async def test_an_image_goes_as_a_photo_only_within_telegrams_photo_limits(
    telegram: tuple[FakeBotAPI, TelegramChannel], data: bytes, method: str
) -> None:
    """The fake refuses a photo out of limits as Telegram does, so a wrong choice fails here."""
    fake, channel = telegram
    blobs = MemoryBlobs()
    part = ImagePart(await blobs.put(data, mime_type="image/png", name="chart.png"))
    await channel.send_part(ChatRef("telegram", str(CHAT)), part, blobs)
    [upload] = fake.uploads
    assert (upload.method, upload.data) == (method, data)


def photo_update(fake: FakeBotAPI, *sizes: tuple[str, int, int | None]) -> TelegramMessage:
    offered = [
        {"file_id": fid, "file_unique_id": fid, "width": side, "height": side}
        | ({"file_size": size} if size is not None else {})
        for fid, side, size in sizes
    ]
    update = fake.message(CHAT, None, photo=offered, caption="look")
    return TelegramMessage.model_validate(update["message"])


def normalized(message: TelegramMessage) -> InboundMessage:
    made = telegram_normalize(message, 1, BotIdentity(1, "bot"))
    assert isinstance(made, InboundMessage)
    return made


async def test_a_photo_is_its_largest_size_that_telegram_lets_us_download(
    telegram: tuple[FakeBotAPI, TelegramChannel],
) -> None:
    fake, channel = telegram
    big = 25 * 1024 * 1024  # over getFile's 20 MB
    message = photo_update(fake, ("s", 90, 900), ("m", 800, 90_000), ("x", 5000, big))
    [photo] = normalized(message).attachments
    assert (photo.platform_id, photo.size) == ("m", 90_000)
    none_fits = photo_update(fake, ("m", 800, big + 1), ("x", 5000, big))
    [refused] = normalized(none_fits).attachments
    assert refused.platform_id == "x"  # the smallest: refused from its size, named to the user


async def test_a_photo_over_the_stores_cap_is_read_in_a_smaller_size(
    telegram: tuple[FakeBotAPI, TelegramChannel],
) -> None:
    fake, channel = telegram
    small = fake.add_file(PNG, "photos/small.png")
    large = fake.add_file(bytes(5000), "photos/large.png")
    message = normalized(photo_update(fake, (small, 90, len(PNG)), (large, 800, 5000)))
    fetched = await fetch_files(channel, MemoryBlobs(max_bytes=1000), [message])
    assert not fetched.refusals
    [part] = fetched.batch[0].parts
    assert isinstance(part, ImagePart) and part.blob.size == len(PNG)
    assert fake.downloads == ["photos/small.png"]  # the large one was never asked for


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


async def test_a_slack_connect_share_of_several_files_is_read_through_files_info(
    slack: tuple[FakeSlack, SlackChannel],
) -> None:
    """A Slack Connect event names its files by id only (`file_access: check_file_info`): each
    is found through `files.info`, kept under its own name, and one over the cap is refused from
    the size `files.info` tells, before any download."""
    fake, channel = slack
    shared = [
        fake.add_file(PNG, "chart.png", "image/png"),
        fake.add_file(b"%PDF-1.4 notes", "notes.pdf", "application/pdf"),
        fake.add_file(bytes(5000), "big.zip", "application/zip"),
    ]
    connect = [{"id": f["id"], "file_access": "check_file_info"} for f in shared]
    event = slack_event("three", subtype="file_share", files=connect)
    message = slack_normalize(event, TEAM, SlackIdentity(BOT_USER, BOT_ID, TEAM), lambda c, t: True)
    assert message is not None and len(message.attachments) == 3
    fetched = await fetch_files(channel, MemoryBlobs(max_bytes=1000), [message])
    [read] = fetched.batch
    assert [(type(p), p.blob.name) for p in read.parts if not isinstance(p, TextPart)] == [
        (ImagePart, "chart.png"),
        (FilePart, "notes.pdf"),
    ]
    [refusal] = fetched.refusals
    assert "“big.zip”" in refusal.reply and "1 KB" in refusal.reply
    assert [c.method for c in fake.calls if c.method == "files.info"] == ["files.info"] * 3
    assert len(fake.downloads) == 2


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


async def test_a_file_the_platform_refuses_is_said_in_the_answer(
    telegram: tuple[FakeBotAPI, TelegramChannel],
) -> None:
    fake, channel = telegram
    fake.refuse["senddocument"] = (400, "Bad Request: file must be non-empty")
    blobs = MemoryBlobs()
    chart = ImagePart(await blobs.put(PNG, mime_type="image/png", name="chart.png"))
    report = FilePart(await blobs.put(b"%PDF-1.4 x", mime_type="application/pdf", name="r.pdf"))
    delivery = Delivery(channel, ChatRef("telegram", str(CHAT)), reply_to="500", blobs=blobs)
    await delivery.finish("Both files", parts=(chart, report))
    texts = [call.text for call in fake.ok(CHAT, "sendMessage")]
    assert texts == ["Both files", "(The file “r.pdf” could not be sent.)"]
    assert [u.name for u in fake.uploads] == ["chart.png"]


async def test_a_file_waits_out_the_chats_rate_limit_like_a_message(
    telegram: tuple[FakeBotAPI, TelegramChannel],
) -> None:
    """Files go through the chat's budget: a 429 on the photo is waited out and the photo
    sent once, not reported lost; the budget then holds the next call for the ban."""
    fake, channel = telegram
    blobs = MemoryBlobs()
    chart = ImagePart(await blobs.put(PNG, mime_type="image/png", name="chart.png"))
    fake.force_429(CHAT, 1)
    failed = await send_parts(channel, ChatRef("telegram", str(CHAT)), [chart], blobs)
    assert failed == []
    assert [c.method for c in fake.rate_limited] == ["sendphoto"]
    assert [u.name for u in fake.uploads] == ["chart.png"]


async def test_telegram_sends_a_file_into_the_answers_topic_as_a_reply(
    telegram: tuple[FakeBotAPI, TelegramChannel],
) -> None:
    fake, channel = telegram
    blobs = MemoryBlobs()
    part = ImagePart(await blobs.put(PNG, mime_type="image/png", name="chart.png"))
    await channel.send_part(ChatRef("telegram", "-100777", "55"), part, blobs, reply_to="600")
    [call] = [c for c in fake.calls if c.method == "sendphoto"]
    assert int(call.params["message_thread_id"]) == 55
    assert call.params["reply_parameters"]["message_id"] == 600


async def test_feishu_sends_an_image_and_a_file_into_the_answers_thread() -> None:
    fake = FakeFeishu()
    await fake.start()
    try:
        channel = FeishuChannel(
            app_id=APP_ID, app_secret=APP_SECRET, domain=fake.url, request_timeout_s=2
        )
        asked = fake.user_message("oc_g", "draw it")
        chat = ChatRef("feishu", "oc_g", "omt_1")
        blobs = MemoryBlobs()
        chart = ImagePart(await blobs.put(PNG, mime_type="image/png", name="chart.png"))
        report = FilePart(await blobs.put(b"%PDF-1.4 r", mime_type="application/pdf", name="r.pdf"))
        for part in (chart, report):
            await channel.send_part(chat, part, blobs, reply_to=asked)
        posted = fake.of("message")
        assert [c.path for c in posted] == [f"/open-apis/im/v1/messages/{asked}/reply"] * 2
        assert [c.body["msg_type"] for c in posted] == ["image", "file"]
        assert all(c.body["reply_in_thread"] is True for c in posted)
        assert [data for _, data in fake.uploads("oc_g")] == [PNG, b"%PDF-1.4 r"]
    finally:
        await fake.close()
