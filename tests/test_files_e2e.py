"""Files through the running app on Telegram (the real aiogram client against the fake Bot API):
a photo fetched into the blob store reaches the model, a tool's chart comes back as a photo in
the chat after the answer, and a file over `media.max_bytes` gets its sender a reply naming the
limit while the rest of the message is answered."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.providers.anthropic import AnthropicProvider
from agent.providers.base import Provider
from agent.providers.scripted import Reply, ScriptedProvider
from bot.runtime.app import App
from content.parts import ImagePart
from tests.conftest import make_config
from tests.fake_anthropic import FakeAnthropic
from tests.fake_llm import Reply as FakeReply
from tests.image_kit import photo
from tests.telegram_fake import TOKEN, FakeBotAPI
from tools.base import ToolContext, ToolResult
from tools.registry import ToolRegistry
from tools.tool import tool

CHAT = 42
PHOTO = photo(64, 48)  # small enough to go to the model as it is
CHART = photo(20, 10, "PNG")
PERSONA = "---\nname: default\ndescription: draws charts\ntools: [chart]\n---\nYou draw.\n"


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotAPI]:
    async with FakeBotAPI(interval_s=0) as api:
        yield api


def app_on(tmp_path: Path, fake: FakeBotAPI, provider: Provider, **media: object) -> App:
    folder = tmp_path / "personas"
    folder.mkdir(exist_ok=True)
    (folder / "default.md").write_text(PERSONA)
    holder: list[App] = []

    @tool
    async def chart(ctx: ToolContext, title: str) -> ToolResult:
        """Draw a chart.

        Args:
            title: what the chart shows
        """
        ref = await holder[0].blobs.put(CHART, mime_type="image/png", name=f"{title}.png")
        return ToolResult(f"drew {title}", parts=(ImagePart(ref),))

    telegram = {
        "enabled": True,
        "token": TOKEN,
        "api_base": fake.url,
        "private_edit_interval_s": 0.05,
    }
    config = make_config(
        tmp_path,
        channels={"telegram": telegram},
        personas={"dirs": [str(folder)]},
        media={"max_bytes": 4000, **media},
    )
    app = App(config, base_dir=tmp_path, provider=provider, registry=ToolRegistry([chart]))
    holder.append(app)
    return app


async def test_a_photo_reaches_the_model_and_a_chart_comes_back_as_a_photo(
    tmp_path: Path, fake: FakeBotAPI
) -> None:
    provider = ScriptedProvider([Reply(calls=[("chart", {"title": "sales"})]), Reply("Here.")])
    async with app_on(tmp_path, fake, provider) as app:
        file_id = fake.add_file(PHOTO, "photos/file_1.jpg")
        sizes = [{"file_id": file_id, "file_unique_id": "u1", "width": 9, "height": 9}]
        sizes[0]["file_size"] = len(PHOTO)
        fake.push(fake.message(CHAT, None, photo=sizes, caption="what is this?"))
        await fake.wait_for(lambda: bool(fake.uploads))
        await app.gateway.wait_idle()
        [user] = [m for m in provider.requests[0].messages if m.role == "user"][-1:]
        [photo] = user.parts
        assert isinstance(photo, ImagePart) and photo.blob.mime_type == "image/jpeg"
        assert (await app.blobs.get(photo.blob.blob_id))[1] == PHOTO
    [upload] = fake.uploads
    assert (upload.method, upload.name, upload.data) == ("sendphoto", "sales.png", CHART)
    assert "Here." in [call.text for call in fake.ok(CHAT, "sendMessage", "editMessageText")]


async def test_a_file_over_the_limit_is_refused_with_a_reply_and_the_text_answered(
    tmp_path: Path, fake: FakeBotAPI
) -> None:
    provider = ScriptedProvider([Reply("Got your question.")])
    async with app_on(tmp_path, fake, provider) as app:
        file_id = fake.add_file(bytes(9000), "documents/big.zip")
        document = {
            "file_id": file_id,
            "file_unique_id": "u2",
            "file_name": "big.zip",
            "file_size": 9000,
        }
        fake.push(fake.message(CHAT, None, document=document, caption="and a question"))
        await fake.wait_for(lambda: bool(provider.requests))
        await app.gateway.wait_idle()
    texts = [call.text or "" for call in fake.ok(CHAT, "sendMessage", "editMessageText")]
    assert any("“big.zip”" in t and "4 KB" in t for t in texts), texts
    assert "Got your question." in texts
    assert fake.downloads == []  # refused from its declared size
    user = provider.requests[0].messages[-1]
    assert user.parts == () and "and a question" in user.content


async def test_the_photo_goes_to_a_real_vendor_api_as_an_image_block(
    tmp_path: Path, fake: FakeBotAPI
) -> None:
    """The whole way: Telegram's photo fetched into the blob store, read back by the Anthropic
    provider for the model call, sent through the real SDK as an image block."""
    async with FakeAnthropic() as vendor:
        vendor.add(FakeReply(text=["A test pattern."]))
        provider = AnthropicProvider(api_key="test-key", base_url=vendor.url, model="m")
        async with app_on(tmp_path, fake, provider) as app:
            file_id = fake.add_file(PHOTO, "photos/file_2.jpg")
            size = {"file_id": file_id, "file_unique_id": "u2", "width": 9, "height": 9}
            fake.push(fake.message(CHAT, None, photo=[size | {"file_size": len(PHOTO)}]))
            await vendor.wait_requests(1, timeout=30)
            await app.gateway.wait_idle()
        content = vendor.requests[0].body["messages"][-1]["content"]
        [image] = [block for block in content if block["type"] == "image"]
        assert image["source"]["media_type"] == "image/jpeg"
        assert base64.b64decode(image["source"]["data"]) == PHOTO
