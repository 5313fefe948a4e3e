"""Files through the running app on Telegram (the real aiogram client against the fake Bot API):
a photo fetched into the blob store reaches the model, a tool's chart comes back as a photo in
the chat after the answer, and a file over `media.max_bytes` gets its sender a reply naming the
limit while the rest of the message is answered."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.providers.anthropic import AnthropicProvider
from agent.providers.base import Provider
from agent.providers.scripted import Reply, ScriptedProvider
from bot.pipeline.resume import GAVE_UP
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
    folder.mkdir(parents=True, exist_ok=True)
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


async def test_the_placeholder_shows_before_the_download_ends(
    tmp_path: Path, fake: FakeBotAPI
) -> None:
    """A big file must not hold "Thinking…" back: the placeholder is up while the download
    still runs, and the answer, which read the file, lands in it."""
    fake.downloads_held = asyncio.Event()
    provider = ScriptedProvider([Reply("A photo.")])
    async with app_on(tmp_path, fake, provider) as app:
        file_id = fake.add_file(PHOTO, "photos/file_3.jpg")
        size = {"file_id": file_id, "file_unique_id": "u3", "width": 9, "height": 9}
        fake.push(fake.message(CHAT, None, photo=[size | {"file_size": len(PHOTO)}]))
        await fake.wait_for(lambda: bool(fake.downloads) and bool(fake.ok(CHAT, "sendMessage")))
        [placeholder] = fake.ok(CHAT, "sendMessage")
        assert not provider.requests  # the file is not in yet
        fake.downloads_held.set()
        await fake.wait_for(lambda: bool(provider.requests))
        await app.gateway.wait_idle()
        [photo] = provider.requests[0].messages[-1].parts
        assert isinstance(photo, ImagePart)
        assert (await app.blobs.get(photo.blob.blob_id))[1] == PHOTO
    edits = fake.ok(CHAT, "editMessageText")
    assert edits[-1].text == "A photo."
    assert int(edits[-1].params["message_id"]) == placeholder.message_id


async def test_a_crash_during_the_download_ends_the_turn_with_an_apology(
    tmp_path: Path, fake: FakeBotAPI
) -> None:
    """The placeholder is up before the file is in, and the user's message is recorded with
    it: a process killed in between leaves a turn with no user message, which the next start
    cannot resume. It says so in the same placeholder, once, and calls no model."""
    fake.downloads_held = asyncio.Event()
    first = ScriptedProvider([Reply("never")])
    async with app_on(tmp_path / "a", fake, first) as app:
        file_id = fake.add_file(PHOTO, "photos/file_4.jpg")
        size = {"file_id": file_id, "file_unique_id": "u4", "width": 9, "height": 9}
        fake.push(fake.message(CHAT, None, photo=[size | {"file_size": len(PHOTO)}]))
        await fake.wait_for(lambda: bool(fake.downloads) and bool(fake.ok(CHAT, "sendMessage")))
        killed(tmp_path / "a", tmp_path / "b")  # the database as a kill -9 would leave it
    fake.downloads_held.set()
    [placeholder] = fake.ok(CHAT, "sendMessage")
    second = ScriptedProvider([])
    async with app_on(tmp_path / "b", fake, second) as app:
        await fake.wait_for(
            lambda: GAVE_UP in [e.text for e in fake.ok(CHAT, "editMessageText")], timeout=30
        )
        await app.gateway.wait_idle()
    assert first.requests == [] and second.requests == []
    last = fake.ok(CHAT, "editMessageText")[-1]
    assert last.text == GAVE_UP and int(last.params["message_id"]) == placeholder.message_id
    assert len(fake.ok(CHAT, "sendMessage")) == 1  # no second placeholder, no second answer
    with contextlib.closing(sqlite3.connect(tmp_path / "b" / "bot.db")) as db:
        [(status, error)] = db.execute("select status, error from turns").fetchall()
    assert status == "failed" and "no user message" in error


def killed(source: Path, target: Path) -> None:
    """What was committed in `source`'s database, copied to `target` (as after a kill -9)."""
    target.mkdir(exist_ok=True)
    with (
        contextlib.closing(sqlite3.connect(source / "bot.db")) as src,
        contextlib.closing(sqlite3.connect(target / "bot.db")) as dst,
    ):
        src.backup(dst)


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


async def test_a_file_over_telegrams_20_mb_is_refused_and_polling_goes_on(
    tmp_path: Path, fake: FakeBotAPI
) -> None:
    """Over getFile's own cap (the store would take it): refused without a call, and the next
    message is read and answered (a peer's polling died on this file)."""
    provider = ScriptedProvider([Reply("Answered without it."), Reply("Still here.")])
    async with app_on(tmp_path, fake, provider, max_bytes=100_000_000) as app:
        file_id = fake.add_file(b"never fetched", "videos/huge.mp4")
        document = {"file_id": file_id, "file_unique_id": "u9", "file_name": "huge.mp4"}
        fake.push(fake.message(CHAT, None, document=document | {"file_size": 25_000_000}))
        await fake.wait_for(lambda: len(provider.requests) == 1)
        await app.gateway.wait_idle()
        fake.push(fake.message(CHAT, "are you there?"))
        await fake.wait_for(lambda: len(provider.requests) == 2)
        await app.gateway.wait_idle()
    texts = [call.text or "" for call in fake.ok(CHAT, "sendMessage", "editMessageText")]
    assert any("“huge.mp4” (25.0 MB) is too large" in t and "up to 20 MB." in t for t in texts)
    assert "Still here." in texts
    assert fake.downloads == [] and not [c for c in fake.calls if c.method == "getfile"]


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
