"""Media parts through the real SDK clients to the fake vendor APIs: images and PDFs as the
vendor's own blocks, text files as text, the rest (audio, a text-only model, a blob that is
gone) as a description; the bytes read from the blob store once per message."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from agent.providers.anthropic import AnthropicProvider
from agent.providers.media import TEXT_ONLY, Media
from agent.providers.media_load import SHELF
from agent.providers.openai import OpenAIProvider
from agent.providers.openai_wire import FOLLOW_UP
from agent.types import Message, ModelRequest, TextDelta, ToolCall
from content.blobs import blob_id_of
from content.parts import AudioPart, BlobRef, FilePart, ImagePart, Part
from tests.blob_kit import MemoryBlobs
from tests.fake_anthropic import FakeAnthropic
from tests.fake_llm import Reply
from tests.fake_openai import FakeOpenAI
from tests.image_kit import photo

PNG = photo(40, 30, "PNG")  # small enough to go as it is
PDF = b"%PDF-1.7\n" + b"x" * 100
CSV = b"city,rain\nLisbon,12\n"
OGG = b"OggS" + bytes(32)


class Blobs(MemoryBlobs):
    """The blob store held in a dict, counting reads of what was stored (not of the marks the
    providers look for), with a synchronous `keep` for building parts."""

    def __init__(self) -> None:
        super().__init__()
        self.data = self.blobs
        self.reads: list[str] = []
        self.kept: set[str] = set()

    def keep(self, data: bytes, mime_type: str, name: str | None = None) -> BlobRef:
        blob_id = blob_id_of(data)
        self.data[blob_id] = (mime_type, data)
        self.kept.add(blob_id)
        return BlobRef(blob_id, mime_type, len(data), name, "test")

    async def get(self, blob_id: str) -> tuple[str, bytes]:
        if blob_id in self.kept:
            self.reads.append(blob_id)
        return await super().get(blob_id)


@pytest.fixture(autouse=True)
def fresh_shelf() -> Iterator[None]:
    """Each test starts with nothing prepared or marked in this process."""
    SHELF.clear()
    yield
    SHELF.clear()


@pytest.fixture
async def openai_fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
async def anthropic_fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as fake:
        yield fake


def provider(vendor: str, url: str, media: Media) -> OpenAIProvider | AnthropicProvider:
    cls = OpenAIProvider if vendor == "openai" else AnthropicProvider
    return cls(api_key="test-key", base_url=url, model="m", media=media)


async def send(p: OpenAIProvider | AnthropicProvider, request: ModelRequest) -> str:
    return "".join([e.text async for e in p.stream(request) if isinstance(e, TextDelta)])


def fake_for(vendor: str, o: FakeOpenAI, a: FakeAnthropic) -> FakeOpenAI | FakeAnthropic:
    return o if vendor == "openai" else a


def everything(blobs: Blobs) -> tuple[Part, ...]:
    return (
        ImagePart(blobs.keep(PNG, "image/png", "chart.png")),
        FilePart(blobs.keep(PDF, "application/pdf", "report.pdf")),
        FilePart(blobs.keep(CSV, "text/csv", "rain.csv")),
        AudioPart(blobs.keep(OGG, "audio/ogg", "voice.ogg")),
    )


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
async def test_media_goes_as_the_vendors_own_blocks(
    vendor: str, openai_fake: FakeOpenAI, anthropic_fake: FakeAnthropic
) -> None:
    fake = fake_for(vendor, openai_fake, anthropic_fake)
    fake.add(Reply(text=["seen"]), Reply(text=["again"]))
    blobs = Blobs()
    p = provider(vendor, fake.url, Media())
    first = Message("user", "what is in these?", parts=everything(blobs))
    assert await send(p, ModelRequest("", (first,), blobs=blobs)) == "seen"
    content: list[dict[str, Any]] = fake.requests[0].body["messages"][0]["content"]
    kinds = [block["type"] for block in content]
    if vendor == "anthropic":
        assert kinds == ["image", "document", "text", "text"]
        image, document, csv, text = content
        assert image["source"]["media_type"] == "image/png"
        assert base64.b64decode(image["source"]["data"]) == PNG
        assert document["source"] == {
            "type": "base64",
            "media_type": "application/pdf",
            "data": base64.b64encode(PDF).decode(),
        }
    else:
        assert kinds == ["text", "image_url", "file", "text"]
        text, image, document, csv = content
        assert (
            image["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()
        )
        assert document["file"]["filename"] == "report.pdf"
        assert document["file"]["file_data"].endswith(base64.b64encode(PDF).decode())
    assert "rain.csv" in csv["text"] and "Lisbon,12" in csv["text"]
    # audio is described (with no transcript yet), next to what the user wrote
    assert text["text"].startswith("what is in these?\n[audio 'voice.ogg': audio/ogg")
    # the next call of the conversation sends the same blocks without reading the blobs again
    reads = len(blobs.reads)
    assert reads == 3  # image, PDF, CSV: audio is not read at all
    later = (first, Message("assistant", "seen"), Message("user", "and now?"))
    assert await send(p, ModelRequest("", later, blobs=blobs)) == "again"
    assert len(blobs.reads) == reads
    assert fake.requests[1].body["messages"][0]["content"] == content
    await p.aclose()


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
async def test_a_text_only_model_reads_descriptions(
    vendor: str, openai_fake: FakeOpenAI, anthropic_fake: FakeAnthropic
) -> None:
    fake = fake_for(vendor, openai_fake, anthropic_fake)
    fake.add(Reply(text=["ok"]))
    blobs = Blobs()
    p = provider(vendor, fake.url, TEXT_ONLY)
    message = Message("user", "look", parts=everything(blobs))
    await send(p, ModelRequest("", (message,), blobs=blobs))
    sent = str(fake.requests[0].body["messages"])
    assert "base64" not in sent
    # the image in words with its size in pixels; a PDF that is not one, described; a CSV's text
    assert "[image 'chart.png': image/png, 40×30, 1 KB]" in sent
    assert "[file 'report.pdf': application/pdf, 109 B] (its text could not be read)" in sent
    assert "Lisbon,12" in sent
    await p.aclose()


async def test_an_openai_compatible_server_is_text_only_unless_configured() -> None:
    assert OpenAIProvider(api_key="k", base_url="http://127.0.0.1:1/v1").media == TEXT_ONLY
    assert OpenAIProvider(api_key="k").media == Media()


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
async def test_a_blob_that_is_gone_is_described_not_a_failed_call(
    vendor: str, openai_fake: FakeOpenAI, anthropic_fake: FakeAnthropic
) -> None:
    fake = fake_for(vendor, openai_fake, anthropic_fake)
    fake.add(Reply(text=["ok"]))
    blobs = Blobs()
    image = ImagePart(blobs.keep(PNG, "image/png", "old.png"))
    blobs.data.clear()  # removed by retention since
    await send(
        p := provider(vendor, fake.url, Media()),
        ModelRequest("", (Message("user", "and this?", parts=(image,)),), blobs=blobs),
    )
    assert "[image 'old.png': image/png" in str(fake.requests[0].body["messages"])
    await p.aclose()


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
async def test_a_tools_image_reaches_the_model_where_the_api_allows(
    vendor: str, openai_fake: FakeOpenAI, anthropic_fake: FakeAnthropic
) -> None:
    """Anthropic takes images in a tool result; Chat Completions takes none in a tool message,
    so there it is described, and the image follows the round's tool messages in a user
    message (a model that takes images sees the QR code too)."""
    fake = fake_for(vendor, openai_fake, anthropic_fake)
    fake.add(Reply(text=["done"]))
    blobs = Blobs()
    qr = ImagePart(blobs.keep(PNG, "image/png", "qr.png"))
    history = (
        Message("user", "pay"),
        Message("assistant", "", tool_calls=(ToolCall("c1", "create_payment", "{}"),)),
        Message("tool", "payment link made", tool_call_id="c1", name="create_payment", parts=(qr,)),
    )
    await send(p := provider(vendor, fake.url, Media()), ModelRequest("", history, blobs=blobs))
    sent = fake.requests[0].body["messages"]
    if vendor == "anthropic":
        [result] = sent[-1]["content"]
        assert result["type"] == "tool_result"
        assert [b["type"] for b in result["content"]] == ["text", "image"]
        assert base64.b64decode(result["content"][1]["source"]["data"]) == PNG
    else:
        assert sent[-2]["role"] == "tool"
        assert sent[-2]["content"].startswith("payment link made\n[image 'qr.png': image/png")
        assert sent[-1]["role"] == "user"
        text, image = sent[-1]["content"]
        assert text == {"type": "text", "text": FOLLOW_UP}
        assert (
            image["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()
        )
    await p.aclose()


async def test_tool_images_follow_the_whole_round_and_only_where_images_are_taken(
    openai_fake: FakeOpenAI,
) -> None:
    """Chat Completions wants every tool message right after its assistant message: the images
    of a round's results go after the last of them, then the conversation goes on."""
    blobs = Blobs()
    chart = ImagePart(blobs.keep(PNG, "image/png", "chart.png"))
    calls = (ToolCall("c1", "mcp__s__chart", "{}"), ToolCall("c2", "mcp__s__stats", "{}"))
    history = (
        Message("user", "how did we do?"),
        Message("assistant", "", tool_calls=calls),
        Message("tool", "a chart", tool_call_id="c1", name="mcp__s__chart", parts=(chart,)),
        Message("tool", "12 sales", tool_call_id="c2", name="mcp__s__stats"),
        Message("assistant", "Twelve sales."),
        Message("user", "and the chart again?"),
    )
    for media, roles in (
        (Media(), ["user", "assistant", "tool", "tool", "user", "assistant", "user"]),
        (TEXT_ONLY, ["user", "assistant", "tool", "tool", "assistant", "user"]),
    ):
        openai_fake.add(Reply(text=["ok"]))
        p = provider("openai", openai_fake.url, media)
        await send(p, ModelRequest("", history, blobs=blobs))
        sent = openai_fake.requests[-1].body["messages"]
        assert [m["role"] for m in sent] == roles
        await p.aclose()
