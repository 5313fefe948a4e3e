"""What `Delivery` assumes of a channel, proven for every channel on its real transport.

Each scenario runs for every harness in tests/channel_harness.py. A fault a platform cannot
produce is not skipped: the scenario then shows the channel never raises that error kind there.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from typing import get_args

import pytest

from adapters.base import (
    ChannelLimits,
    DeliveryUncertain,
    FetchesFiles,
    MessageGone,
    MessageHandle,
    OutboundContent,
    PlatformStatus,
    RateLimited,
    SendsParts,
)
from bot.pipeline.attachments import fetch_files
from bot.pipeline.delivery import PLACEHOLDER, Delivery
from content.parts import FilePart, ImagePart
from tests.blob_kit import png
from tests.channel_harness import HARNESSES, ChannelHarness, Fault, Seen, UploadTooLarge
from tools.builtin.payment import qr_png
from tools.events import AnswerDelta, Final

ANSWER = "Once upon a time, the end."
# Plain text Telegram's markdown leaves alone, with characters outside the BMP (2 UTF-16 units
# each, some of them two code points) and CJK (1 unit, 3 bytes).
PARAGRAPH = "Plain words, 漢字かな交じり文, 😀👍🏽🇺🇦 and naïve café. " * 9
PLAIN = ["plain ascii", "漢字かな交じり文", "😀👍🏽🇺🇦", "naïve café, Ελληνικά", "two\nlines"]
MARKED_UP = "**bold**, _italic_ and `code`"


@pytest.fixture(params=sorted(HARNESSES))
async def harness(request: pytest.FixtureRequest) -> AsyncIterator[ChannelHarness]:
    made = HARNESSES[request.param]()
    await made.start()
    try:
        yield made
    finally:
        await made.close()


def texts(seen: list[Seen]) -> list[str]:
    return [message.text for message in seen]


def long_text(limits: ChannelLimits, times: float) -> str:
    """Paragraphs of mixed scripts, `times` the channel's limit long as it measures."""
    count = math.ceil(times * limits.max_text_length / limits.length(PARAGRAPH)) + 1
    text = "\n\n".join(f"Paragraph {i}: {PARAGRAPH}".rstrip() for i in range(count))
    assert limits.length(text) > times * limits.max_text_length
    return text


async def placeholder(harness: ChannelHarness) -> MessageHandle:
    return await harness.channel.send(
        harness.chat, OutboundContent(PLACEHOLDER), reply_to=harness.reply_to, final=False
    )


def delivery(harness: ChannelHarness) -> Delivery:
    return Delivery(harness.channel, harness.chat, reply_to=harness.reply_to)


async def test_a_harness_refuses_faults_its_platform_cannot_produce(
    harness: ChannelHarness,
) -> None:
    for fault in set(get_args(Fault)) - harness.faults:
        with pytest.raises(ValueError, match=fault):
            harness.fail_next(fault)
    assert not harness.armed()


# 1. placeholder


def test_the_channel_says_whether_its_platform_answered(harness: ChannelHarness) -> None:
    """Readiness waits for the platform (bot/ops/health.py), not for a run to have lasted."""
    assert isinstance(harness.channel, PlatformStatus)
    assert harness.channel.platform_down() is None or isinstance(
        harness.channel.platform_down(), str
    )


async def test_the_placeholder_is_one_message_in_reply(harness: ChannelHarness) -> None:
    handle = await placeholder(harness)
    assert isinstance(handle, MessageHandle) and handle.chat == harness.chat and handle.message_id
    [seen] = await harness.what_the_user_sees()
    assert seen.text == PLACEHOLDER
    assert seen.reply_to == (harness.reply_to if harness.replies else None)
    assert seen.ended is (False if harness.shows_end else None)


# 2. edits


async def test_edits_change_that_same_message(harness: ChannelHarness) -> None:
    handle = await placeholder(harness)
    # at the channel's own cadence, as a delivery sends them (Feishu: 10 card operations a second)
    pace = harness.channel.limits_for(harness.chat).min_edit_interval_s
    for text in ("Hello", "Hello, world", "Goodbye"):  # replaced, extended, replaced
        await asyncio.sleep(pace)
        await harness.channel.edit(handle, OutboundContent(text))
        assert texts(await harness.what_the_user_sees()) == [text]
    assert harness.posts() == 1


# 3. not modified


async def test_an_edit_to_the_text_shown_is_success(harness: ChannelHarness) -> None:
    handle = await placeholder(harness)
    await harness.channel.edit(handle, OutboundContent(PLACEHOLDER))
    assert texts(await harness.what_the_user_sees()) == [PLACEHOLDER]
    if "not_modified" in harness.faults:
        # The platform already shows the new text (another process made the same edit).
        harness.fail_next("not_modified")
        await harness.channel.edit(handle, OutboundContent("Hello"))
        assert not harness.armed()
    else:
        await harness.channel.edit(handle, OutboundContent("Hello"))
        await harness.channel.edit(handle, OutboundContent("Hello"), final=True)
    assert texts(await harness.what_the_user_sees()) == ["Hello"]
    assert harness.posts() == 1


# 4. RateLimited


async def test_a_rate_limit_is_rate_limited_with_the_platforms_wait(
    harness: ChannelHarness,
) -> None:
    handle = await placeholder(harness)
    if "rate_limited" in harness.faults:
        harness.fail_next("rate_limited")
        before = harness.requests()
        with pytest.raises(RateLimited) as caught:
            await harness.channel.edit(handle, OutboundContent("Hello"))
        assert caught.value.retry_after == harness.retry_after > 0
        assert harness.requests() == before + 1 and not harness.armed()
        assert texts(await harness.what_the_user_sees()) == [PLACEHOLDER]
    else:
        for step in range(30):  # a burst with no pause at all: the platform has no rate limit
            await harness.channel.edit(handle, OutboundContent(f"step {step}"))
        assert texts(await harness.what_the_user_sees()) == ["step 29"]
    assert harness.posts() == 1


async def test_a_rate_limited_send_shows_nothing(harness: ChannelHarness) -> None:
    if "rate_limited" in harness.faults:
        harness.fail_next("rate_limited")
        with pytest.raises(RateLimited) as caught:
            await placeholder(harness)
        assert caught.value.retry_after == harness.retry_after
        assert harness.posts() == 1 and not harness.armed()
        assert await harness.what_the_user_sees() == []
    else:
        burst = [f"message {number}" for number in range(30)]
        for text in burst:
            await harness.channel.send(harness.chat, OutboundContent(text), final=True)
        assert texts(await harness.what_the_user_sees()) == burst


async def test_delivery_waits_out_a_rate_limit_and_shows_the_final_once(
    harness: ChannelHarness,
) -> None:
    turn = delivery(harness)
    await turn.start()
    if "rate_limited" in harness.faults:
        harness.fail_next("rate_limited")
    for word in ANSWER.split(" "):
        await turn.on_event(AnswerDelta(word + " "))
    await turn.on_event(Final(ANSWER))
    assert not harness.armed()
    assert texts(await harness.what_the_user_sees()) == [ANSWER]
    assert harness.posts() == 1


# 5. MessageGone


async def test_an_edit_to_a_gone_message_is_message_gone(harness: ChannelHarness) -> None:
    handle = await placeholder(harness)
    if "message_gone" in harness.faults:
        harness.fail_next("message_gone")
        with pytest.raises(MessageGone):
            await harness.channel.edit(handle, OutboundContent("Hello"))
        assert await harness.what_the_user_sees() == []
    else:
        await harness.channel.edit(handle, OutboundContent("Hello"))  # the platform keeps it
        assert texts(await harness.what_the_user_sees()) == ["Hello"]


async def test_delivery_continues_in_a_new_message_when_the_placeholder_is_gone(
    harness: ChannelHarness,
) -> None:
    turn = delivery(harness)
    await turn.start()
    gone = "message_gone" in harness.faults
    if gone:
        harness.fail_next("message_gone")
    await turn.finish(ANSWER)
    assert not harness.armed()
    assert texts(await harness.what_the_user_sees()) == [ANSWER]
    assert harness.posts() == (2 if gone else 1)


# 6. DeliveryUncertain

UNCERTAIN: list[Fault] = ["send_timeout", "send_garbled"]


@pytest.mark.parametrize("fault", UNCERTAIN)
async def test_a_send_of_unknown_fate_is_uncertain_and_never_resent(
    harness: ChannelHarness, fault: Fault
) -> None:
    if fault in harness.faults:
        harness.fail_next(fault)  # the message lands; its answer is lost
        with pytest.raises(DeliveryUncertain):
            await harness.channel.send(harness.chat, OutboundContent(ANSWER), final=True)
        assert harness.posts() == 1 and not harness.armed()
    else:
        async with harness.user_away():  # the platform keeps it for the user: nothing is unknown
            await harness.channel.send(harness.chat, OutboundContent(ANSWER), final=True)
    assert texts(await harness.what_the_user_sees()) == [ANSWER]


@pytest.mark.parametrize("fault", UNCERTAIN)
async def test_delivery_never_resends_a_continuation_of_unknown_fate(
    harness: ChannelHarness, fault: Fault
) -> None:
    text = long_text(harness.channel.limits_for(harness.chat), 1.2)  # two messages
    turn = delivery(harness)
    await turn.start()
    if fault in harness.faults:
        harness.fail_next(fault)
        with pytest.raises(DeliveryUncertain):
            await turn.finish(text)
    else:
        async with harness.user_away():
            await turn.finish(text)
    seen = await harness.what_the_user_sees()
    assert len(seen) == 2 and harness.posts() == 2
    assert " ".join(texts(seen)).split() == text.split()


# 7. overflow


async def test_length_is_measured_as_the_platform_measures_it(harness: ChannelHarness) -> None:
    limits = harness.channel.limits_for(harness.chat)
    for text in [*PLAIN, MARKED_UP]:
        await harness.channel.send(harness.chat, OutboundContent(text), final=True)
    seen = await harness.what_the_user_sees()
    assert len(seen) == len(PLAIN) + 1
    for text, shown in zip(PLAIN, seen, strict=False):
        assert shown.text == text
        assert limits.length(text) == harness.platform_length(shown.text), text
    # Markup the platform renders counts at most as written: a bound, never an underestimate.
    assert limits.length(MARKED_UP) >= harness.platform_length(seen[-1].text)
    assert limits.max_text_length <= harness.platform_limit


async def test_a_final_past_the_limit_lands_as_several_messages_in_order(
    harness: ChannelHarness,
) -> None:
    text = long_text(harness.channel.limits_for(harness.chat), 2.5)
    turn = delivery(harness)
    await turn.start()
    await turn.finish(text)
    seen = await harness.what_the_user_sees()
    assert len(seen) == 3 and harness.posts() == 3
    assert all(harness.platform_length(s.text) <= harness.platform_limit for s in seen)
    assert " ".join(texts(seen)).split() == text.split()
    assert seen[0].reply_to == (harness.reply_to if harness.replies else None)
    assert all(s.ended is (True if harness.shows_end else None) for s in seen)


# 8. final


async def test_a_final_edit_ends_the_message(harness: ChannelHarness) -> None:
    handle = await placeholder(harness)
    await harness.channel.edit(handle, OutboundContent(ANSWER), final=True)
    [seen] = await harness.what_the_user_sees()
    assert seen.text == ANSWER
    assert seen.ended is (True if harness.shows_end else None)


async def test_delivery_fills_one_placeholder_that_ends_holding_the_final(
    harness: ChannelHarness,
) -> None:
    turn = delivery(harness)
    await turn.start()
    await turn.on_event(AnswerDelta("Once upon"))
    await harness.wait_until(lambda seen: texts(seen) == ["Once upon"])  # a preview showed
    await turn.on_event(AnswerDelta(" a time"))
    await turn.on_event(Final(ANSWER))
    [seen] = await harness.what_the_user_sees()
    assert seen.text == ANSWER
    assert seen.reply_to == (harness.reply_to if harness.replies else None)
    assert seen.ended is (True if harness.shows_end else None)
    assert harness.posts() == 1


# 9. files


PICTURE = png(24, 16, "orange")
COLORS = ("red", "green", "blue")
PDF = b"%PDF-1.4\n" + bytes(range(256)) * 40 + b"\n%%EOF\n"  # not text: every byte value


async def test_a_file_makes_the_round_trip(harness: ChannelHarness) -> None:
    """A user sends a file, it is fetched into the blob store unchanged; the answer sends it
    back, and the platform received the same bytes under the same name."""
    message = await harness.user_sends_file(PDF, "report.pdf", "application/pdf")
    fetched = await fetch_files(harness.channel, harness.blobs, [message])
    assert not fetched.refusals
    [part] = fetched.batch[0].parts
    assert isinstance(part, FilePart)
    assert part.blob.name == "report.pdf"
    assert await harness.blobs.get(part.blob.blob_id) == ("application/pdf", PDF)
    assert isinstance(harness.channel, SendsParts)
    await harness.channel.send_part(
        harness.chat, part, harness.blobs, caption="Here it is", reply_to=harness.reply_to
    )
    assert await harness.uploads() == [("report.pdf", PDF)]


async def test_a_file_over_the_cap_is_refused_before_any_download(
    harness: ChannelHarness,
) -> None:
    harness.blobs.limit_to(1000)
    if not isinstance(harness.channel, FetchesFiles):  # the client uploads: refused there
        with pytest.raises(UploadTooLarge):
            await harness.user_sends_file(PDF, "big.pdf", "application/pdf")
        assert not harness.blobs.blobs
        return
    message = await harness.user_sends_file(PDF, "big.pdf", "application/pdf")
    fetched = await fetch_files(harness.channel, harness.blobs, [message])
    [refusal] = fetched.refusals
    assert "big.pdf" in refusal.reply and "1 KB" in refusal.reply
    assert fetched.batch[0].parts == () and not harness.blobs.blobs
    if harness.declares_size:  # else refused from the download's length, its body unread
        assert harness.downloads() == 0


async def test_a_file_that_declared_a_wrong_size_is_cut_off_at_the_cap(
    harness: ChannelHarness,
) -> None:
    harness.blobs.limit_to(1000)
    if not isinstance(harness.channel, FetchesFiles):  # an upload is cut off as it is read
        with pytest.raises(UploadTooLarge):
            await harness.user_sends_file(PDF, "liar.pdf", "application/pdf", declared_size=10)
        assert not harness.blobs.blobs
        return
    message = await harness.user_sends_file(PDF, "liar.pdf", "application/pdf", declared_size=10)
    fetched = await fetch_files(harness.channel, harness.blobs, [message])
    [refusal] = fetched.refusals
    assert "liar.pdf" in refusal.reply
    assert not harness.blobs.blobs


async def test_a_photo_comes_in_and_an_image_goes_out_as_one(harness: ChannelHarness) -> None:
    """The platform's way of sending a picture is read as an image (its type from its bytes);
    an image the answer carries is shown as a picture, not as a file to download."""
    message = await harness.user_sends_photo(PICTURE)
    fetched = await fetch_files(harness.channel, harness.blobs, [message])
    assert not fetched.refusals
    [part] = fetched.batch[0].parts
    assert isinstance(part, ImagePart) and part.blob.mime_type == "image/png"
    assert await harness.blobs.get(part.blob.blob_id) == ("image/png", PICTURE)
    assert isinstance(harness.channel, SendsParts)
    await harness.channel.send_part(harness.chat, part, harness.blobs, reply_to=harness.reply_to)
    assert await harness.images_shown() == [PICTURE]


async def test_several_files_sent_at_once_are_all_read(harness: ChannelHarness) -> None:
    """Every file, not the first only (a peer read only Slack's first)."""
    files = [(png(8 + i, 8, color), f"p{i}.png", "image/png") for i, color in enumerate(COLORS)]
    messages = await harness.user_sends_files(files)
    fetched = await fetch_files(harness.channel, harness.blobs, messages)
    assert not fetched.refusals
    parts = [p for m in fetched.batch for p in m.parts if isinstance(p, ImagePart)]
    assert len(parts) == len(files)
    assert [(await harness.blobs.get(p.blob.blob_id))[1] for p in parts] == [f[0] for f in files]


async def test_a_payments_qr_code_reaches_the_user_as_an_image(harness: ChannelHarness) -> None:
    """`create_payment`'s QR code (an image part of its result) follows the answer's text and
    is shown as a picture on every platform, not only in the widget's card."""
    qr = ImagePart(
        await harness.blobs.put(
            qr_png("https://pay.example/o/ORD-1"), mime_type="image/png", name="payment-qr.png"
        )
    )
    turn = Delivery(harness.channel, harness.chat, reply_to=harness.reply_to, blobs=harness.blobs)
    await turn.start()
    await turn.finish("Scan the code to pay.", parts=(qr,))
    [png_bytes] = await harness.images_shown()
    assert png_bytes == (await harness.blobs.get(qr.blob.blob_id))[1]
    assert "Scan the code to pay." in texts(await harness.what_the_user_sees())
