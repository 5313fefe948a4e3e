"""Images on their way to the model, through the real SDK clients to the fake vendor APIs: what
the vendor received, decoded — scaled within the vendor's bounds, converted to a type it takes,
upright; the last few of a history as images, the rest in words; a refused image dropped and
the call made again without it; a model without vision told the image's size in words."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from PIL import Image

from agent.providers.anthropic import AnthropicProvider
from agent.providers.base import ProviderRejected
from agent.providers.media import TEXT_ONLY, Media, media_for
from agent.providers.media_load import SHELF
from agent.providers.openai import OpenAIProvider
from agent.types import Message, ModelRequest, TextDelta
from content.parts import FilePart, ImagePart
from tests.blob_kit import MemoryBlobs
from tests.fake_anthropic import FakeAnthropic
from tests.fake_llm import Reply, fail
from tests.fake_openai import FakeOpenAI
from tests.image_kit import animated_gif, encoded, opened, photo, sideways_jpeg, text_pdf

Vendor = OpenAIProvider | AnthropicProvider
VENDORS = ["openai", "anthropic"]


@pytest.fixture(autouse=True)
def fresh_shelf() -> Iterator[None]:
    SHELF.clear()
    yield
    SHELF.clear()


@pytest.fixture
async def fakes() -> AsyncIterator[dict[str, FakeOpenAI | FakeAnthropic]]:
    async with FakeOpenAI() as openai_fake, FakeAnthropic() as anthropic_fake:
        yield {"openai": openai_fake, "anthropic": anthropic_fake}


def provider(vendor: str, url: str, media: Media | None = None, history: int = 4) -> Vendor:
    media = media or media_for(vendor, None, ["image", "file"], history)
    cls = OpenAIProvider if vendor == "openai" else AnthropicProvider
    return cls(api_key="test-key", base_url=url, model="m", media=media)


async def send(p: Vendor, messages: tuple[Message, ...], blobs: MemoryBlobs) -> str:
    request = ModelRequest("", messages, blobs=blobs)
    return "".join([e.text async for e in p.stream(request) if isinstance(e, TextDelta)])


async def image(blobs: MemoryBlobs, data: bytes, mime: str, name: str) -> ImagePart:
    return ImagePart(await blobs.put(data, mime_type=mime, name=name))


def images_sent(vendor: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """(media type, base64) of every image in a request body, in order."""
    found = []
    for message in body["messages"]:
        content = message["content"]
        for block in content if isinstance(content, list) else ():
            if vendor == "anthropic" and block["type"] == "image":
                found.append((block["source"]["media_type"], block["source"]["data"]))
            elif vendor == "openai" and block["type"] == "image_url":
                head, _, data = block["image_url"]["url"].partition(",")
                found.append((head.removeprefix("data:").removesuffix(";base64"), data))
    return found


def text_sent(body: dict[str, Any]) -> str:
    parts = []
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            parts.append(content)
        else:
            parts += [b.get("text", "") for b in content if isinstance(b, dict)]
    return "\n".join(parts)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_large_photo_is_scaled_within_the_vendors_bounds(
    vendor: str, fakes: dict[str, Any]
) -> None:
    fake = fakes[vendor]
    fake.add(Reply(text=["ok"]))
    blobs = MemoryBlobs()
    big = await image(blobs, photo(4000, 3000), "image/jpeg", "photo.jpg")
    p = provider(vendor, fake.url)
    await send(p, (Message("user", "what is it?", parts=(big,)),), blobs)
    [(mime, data)] = images_sent(vendor, fake.requests[0].body)
    seen = opened(data)
    assert mime == "image/jpeg" and seen.format == "JPEG"
    assert max(seen.size) <= 1568 and abs(seen.width / seen.height - 4 / 3) < 0.01
    if vendor == "openai":
        assert min(seen.size) <= 768  # "high" detail's short side
    else:
        assert seen.width * seen.height <= 1_200_000  # ~1,600 tokens
    assert "exif" not in seen.info  # nothing of the camera's metadata goes along
    await p.aclose()


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize(
    ("fmt", "mime"),
    [("HEIF", "image/heic"), ("BMP", "image/bmp"), ("TIFF", "image/tiff")],
)
async def test_a_type_the_vendor_does_not_take_goes_as_jpeg(
    vendor: str, fmt: str, mime: str, fakes: dict[str, Any]
) -> None:
    fake = fakes[vendor]
    fake.add(Reply(text=["ok"]))
    blobs = MemoryBlobs()
    part = await image(blobs, photo(64, 48, fmt), mime, f"shot.{fmt.lower()}")
    p = provider(vendor, fake.url)
    await send(p, (Message("user", "", parts=(part,)),), blobs)
    [(sent_mime, data)] = images_sent(vendor, fake.requests[0].body)
    assert sent_mime == "image/jpeg" and opened(data).format == "JPEG"
    assert opened(data).size == (64, 48)
    await p.aclose()


@pytest.mark.parametrize("vendor", VENDORS)
async def test_orientation_transparency_and_animation(vendor: str, fakes: dict[str, Any]) -> None:
    """A photo stored sideways arrives upright; a transparent PNG stays a PNG with its alpha;
    an animated GIF is its first frame where the vendor takes no animation (OpenAI)."""
    fake = fakes[vendor]
    fake.add(Reply(text=["ok"]))
    blobs = MemoryBlobs()
    sideways = await image(blobs, sideways_jpeg(80, 40), "image/jpeg", "side.jpg")
    clear = Image.new("RGBA", (2000, 1500), (200, 40, 40, 255))
    clear.putalpha(Image.linear_gradient("L").resize((2000, 1500)))  # a fade: compresses well
    glass = await image(blobs, _png(clear), "image/png", "glass.png")
    gif = await image(blobs, animated_gif(30, 20), "image/gif", "dance.gif")
    p = provider(vendor, fake.url)
    await send(p, (Message("user", "", parts=(sideways, glass, gif)),), blobs)
    (m1, upright), (m2, alpha), (m3, frame) = images_sent(vendor, fake.requests[0].body)
    assert m1 == "image/jpeg" and opened(upright).size == (40, 80)
    assert m2 == "image/png" and opened(alpha).mode == "RGBA" and max(opened(alpha).size) <= 1568
    if vendor == "openai":
        assert m3 == "image/png" and not getattr(opened(frame), "is_animated", False)
    else:
        assert m3 == "image/gif"  # Anthropic takes GIFs as they are
    await p.aclose()


def _png(image: Image.Image) -> bytes:
    return encoded(image, "PNG")


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_broken_image_or_an_svg_is_described_not_sent(
    vendor: str, fakes: dict[str, Any]
) -> None:
    fake = fakes[vendor]
    fake.add(Reply(text=["ok"]))
    blobs = MemoryBlobs()
    broken = await image(blobs, photo(200, 100)[:300], "image/jpeg", "cut.jpg")
    noise = await image(blobs, b"not an image at all", "image/png", "fake.png")
    svg = await image(blobs, b"<svg xmlns='http://www.w3.org/2000/svg'/>", "image/svg+xml", "x.svg")
    good = await image(blobs, photo(20, 10), "image/jpeg", "ok.jpg")
    p = provider(vendor, fake.url)
    assert await send(p, (Message("user", "see", parts=(broken, noise, svg, good)),), blobs)
    body = fake.requests[0].body
    assert len(images_sent(vendor, body)) == 1  # only the good one
    text = text_sent(body)
    assert "[image 'cut.jpg': image/jpeg" in text and "could not be read as an image" in text
    assert "[image 'fake.png': image/png" in text
    assert "[image 'x.svg': image/svg+xml" in text
    await p.aclose()


@pytest.mark.parametrize("vendor", VENDORS)
async def test_only_the_last_images_of_a_history_go_again(
    vendor: str, fakes: dict[str, Any]
) -> None:
    """With `llm.media_history_images: 2`, a third image pushes the first out: it goes as its
    description from then on, and the request that follows stays consistent with it."""
    fake = fakes[vendor]
    blobs = MemoryBlobs()
    p = provider(vendor, fake.url, history=2)
    history: list[Message] = []
    for n in range(4):
        part = await image(blobs, photo(30 + n, 20), "image/jpeg", f"p{n}.jpg")
        history += [Message("user", f"photo {n}", parts=(part,))]
        fake.add(Reply(text=[f"seen {n}"]))
        history.append(Message("assistant", await send(p, tuple(history), blobs)))
    widths = [[opened(d).width for _, d in images_sent(vendor, r.body)] for r in fake.requests]
    assert widths == [[30], [30, 31], [31, 32], [32, 33]]
    last = text_sent(fake.requests[-1].body)
    for n in (0, 1):
        assert f"[image 'p{n}.jpg': image/jpeg, {30 + n}×20," in last
        assert "an earlier image: only the newest are sent again" in last
    await p.aclose()


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_refused_image_is_dropped_and_the_call_made_again_without_it(
    vendor: str, fakes: dict[str, Any]
) -> None:
    fake = fakes[vendor]
    refusal = (
        "messages.2.content.0.image.source.base64.data: Could not process image"
        if vendor == "anthropic"
        else "You uploaded an unsupported image. Please make sure your image is valid."
    )
    fake.add(
        Reply(text=["a cat"]),
        fail(400, "invalid_request_error", refusal),
        Reply(text=["I could not see that one"]),
        Reply(text=["still fine"]),
    )
    blobs = MemoryBlobs()
    cat = await image(blobs, photo(30, 20), "image/jpeg", "cat.jpg")
    odd = await image(blobs, photo(31, 20), "image/jpeg", "odd.jpg")
    p = provider(vendor, fake.url)
    history = [Message("user", "look", parts=(cat,))]
    history.append(Message("assistant", await send(p, tuple(history), blobs)))
    history.append(Message("user", "and this", parts=(odd,)))
    assert await send(p, tuple(history), blobs) == "I could not see that one"
    refused, retried = fake.requests[1].body, fake.requests[2].body
    assert [opened(d).width for _, d in images_sent(vendor, refused)] == [30, 31]
    assert [opened(d).width for _, d in images_sent(vendor, retried)] == [30]  # the cat stays
    assert "odd.jpg" in text_sent(retried) and "refused this image" in text_sent(retried)
    await p.aclose()
    # a restart: nothing in this process remembers; the store's mark does
    SHELF.clear()
    p = provider(vendor, fake.url)
    fresh = tuple(Message(m.role, m.content, parts=m.parts) for m in history)
    assert await send(p, (*fresh, Message("assistant", "ok"), Message("user", "hm?")), blobs)
    later = fake.requests[3].body
    assert [opened(d).width for _, d in images_sent(vendor, later)] == [30]
    assert "refused this image" in text_sent(later)
    await p.aclose()


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_refusal_that_names_no_image_is_no_reason_to_drop_one(
    vendor: str, fakes: dict[str, Any]
) -> None:
    fake = fakes[vendor]
    fake.add(fail(400, "invalid_request_error", "max_tokens: must be at most 8192"))
    blobs = MemoryBlobs()
    cat = await image(blobs, photo(30, 20), "image/jpeg", "cat.jpg")
    p = provider(vendor, fake.url)
    with pytest.raises(ProviderRejected):
        await send(p, (Message("user", "look", parts=(cat,)),), blobs)
    assert len(fake.requests) == 1 and not SHELF.dropped
    await p.aclose()


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_model_without_vision_reads_the_image_in_words(
    vendor: str, fakes: dict[str, Any]
) -> None:
    fake = fakes[vendor]
    fake.add(Reply(text=["ok"]))
    blobs = MemoryBlobs()
    data = photo(1600, 1200)
    part = await image(blobs, data, "image/jpeg", "photo.jpg")
    p = provider(vendor, fake.url, TEXT_ONLY)
    await send(p, (Message("user", "what is it?", parts=(part,)),), blobs)
    body = fake.requests[0].body
    assert not images_sent(vendor, body) and "base64" not in str(body)
    assert f"[image 'photo.jpg': image/jpeg, 1600×1200, {len(data) / 1000:.0f} KB]" in text_sent(
        body
    )
    await p.aclose()


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_pdf_goes_as_its_text_where_the_model_takes_no_documents(
    vendor: str, fakes: dict[str, Any]
) -> None:
    fake = fakes[vendor]
    fake.add(Reply(text=["ok"]), Reply(text=["ok"]))
    blobs = MemoryBlobs()
    data = text_pdf("Quarterly revenue rose 12 percent", "Costs fell in March")
    report = FilePart(await blobs.put(data, mime_type="application/pdf", name="report.pdf"))
    p = provider(vendor, fake.url, media_for(vendor, None, ["image"]))
    await send(p, (Message("user", "summarise", parts=(report,)),), blobs)
    text = text_sent(fake.requests[0].body)
    assert "[The file 'report.pdf' (application/pdf) reads:]\n(2 pages, as text)" in text
    assert "[page 1]\nQuarterly revenue rose 12 percent" in text
    assert "[page 2]\nCosts fell in March" in text
    await p.aclose()
    # a model that takes documents gets the PDF itself
    p = provider(vendor, fake.url)
    await send(p, (Message("user", "summarise", parts=(report,)),), blobs)
    assert "Quarterly" not in text_sent(fake.requests[1].body)
    assert base64.b64encode(data).decode() in str(fake.requests[1].body)
    await p.aclose()


class CountingBlobs(MemoryBlobs):
    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    async def get(self, blob_id: str) -> tuple[str, bytes]:
        self.reads.append(blob_id)
        return await super().get(blob_id)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_photo_is_prepared_once_even_when_the_history_is_built_again(
    vendor: str, fakes: dict[str, Any]
) -> None:
    """The store's history cache may hand out new message objects (after eviction): the
    prepared image is kept by blob and target in the process, not read and scaled again."""
    fake = fakes[vendor]
    fake.add(Reply(text=["a"]), Reply(text=["b"]))
    blobs = CountingBlobs()
    part = await image(blobs, photo(2000, 1500), "image/jpeg", "big.jpg")
    p = provider(vendor, fake.url)
    await send(p, (Message("user", "one", parts=(part,)),), blobs)
    assert part.blob.blob_id in blobs.reads
    blobs.reads.clear()
    again = (Message("user", "one", parts=(part,)), Message("assistant", "a"), Message("user", "?"))
    await send(p, again, blobs)
    assert blobs.reads == []
    first, second = (images_sent(vendor, r.body) for r in fake.requests)
    assert first == second
    await p.aclose()


@pytest.mark.parametrize("vendor", VENDORS)
async def test_every_image_of_the_current_turn_goes_then_only_the_last_few(
    vendor: str, fakes: dict[str, Any]
) -> None:
    fake = fakes[vendor]
    fake.add(Reply(text=["six photos"]), Reply(text=["ok"]))
    blobs = MemoryBlobs()
    parts = tuple(
        [await image(blobs, photo(20 + n, 10), "image/jpeg", f"{n}.jpg") for n in range(6)]
    )
    p = provider(vendor, fake.url, history=2)
    history = (Message("user", "all of these", parts=parts),)
    reply = await send(p, history, blobs)
    await send(p, (*history, Message("assistant", reply), Message("user", "thanks")), blobs)
    widths = [[opened(d).width for _, d in images_sent(vendor, r.body)] for r in fake.requests]
    assert widths == [[20, 21, 22, 23, 24, 25], [24, 25]]
    await p.aclose()


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_pdf_refused_as_a_document_goes_as_its_text_from_then_on(
    vendor: str, fakes: dict[str, Any]
) -> None:
    fake = fakes[vendor]
    refusal = (
        "messages.0.content.0.document.source.base64.data: The PDF specified was not valid."
        if vendor == "anthropic"
        else "Invalid file data: the PDF could not be read."
    )
    fake.add(fail(400, "invalid_request_error", refusal), Reply(text=["read"]), Reply(text=["ok"]))
    blobs = MemoryBlobs()
    data = text_pdf("Order 7731 shipped on Monday")
    order = FilePart(await blobs.put(data, mime_type="application/pdf", name="order.pdf"))
    p = provider(vendor, fake.url)
    history = (Message("user", "where is it?", parts=(order,)),)
    assert await send(p, history, blobs) == "read"
    refused, retried = fake.requests[0].body, fake.requests[1].body
    assert base64.b64encode(data).decode() in str(refused)
    assert base64.b64encode(data).decode() not in str(retried)
    assert "(1 page, as text: the AI model refused it as a document)" in text_sent(retried)
    assert "Order 7731 shipped on Monday" in text_sent(retried)
    await send(p, (*history, Message("assistant", "read"), Message("user", "and?")), blobs)
    assert "Order 7731" in text_sent(fake.requests[2].body)
    assert base64.b64encode(data).decode() not in str(fake.requests[2].body)
    await p.aclose()
