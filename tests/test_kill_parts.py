"""A turn whose history holds an image and a file, its `bot serve` killed with SIGKILL mid-turn
and started again: the turn (itself a photo with a caption, fetched into the blob store) is
resumed into the same Telegram placeholder with that history read back from the database, the
recorded tool result replayed, and every part unchanged."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent.providers.openai_wire import FOLLOW_UP
from agent.types import Message
from bot.storage import SqliteStore
from content.blobs import blob_id_of
from content.disk import DiskBlobStore
from content.parts import FilePart, ImagePart, parts_to_json
from tests import image_kit
from tests.fake_llm import Call, Reply, llm_config
from tests.fake_openai import FakeOpenAI
from tests.kill_kit import until
from tests.telegram_fake import TOKEN, FakeBotAPI

pytestmark = [
    pytest.mark.process,
    pytest.mark.timeout(240),
]  # two `bot serve` starts on a loaded machine
START_S = 90.0
CHAT = 4343
PAY = Call("create_payment", '{"service": "ASSESSMENT", "category": "GENERAL", "method": "CARD"}')
EARLIER = "Here is my passport photo and the signed form."
ASK = "I want to pay for the assessment by card; my last receipt is attached"
RECEIPT = image_kit.photo(24, 16)  # a real JPEG: one that is not decoded is described instead
ANSWER = "Your order is ready: pay 100.00 USD with the link before it expires."
PERSONA = """---
name: default
description: Sells assessments.
tools: [create_payment]
---
You sell assessments.
"""


@pytest.fixture
async def servers() -> AsyncIterator[tuple[FakeBotAPI, FakeOpenAI]]:
    fake = FakeBotAPI(interval_s=0.05)
    await fake.start()
    async with FakeOpenAI() as model:
        yield fake, model
    await fake.close()


async def _earlier_turn(folder: Path) -> tuple[ImagePart, FilePart]:
    """What the conversation said before: a photo and a PDF the user sent, kept on disk."""
    blobs = DiskBlobStore(folder / "data" / "media", max_bytes=20_000_000)
    photo = ImagePart(
        await blobs.put(image_kit.photo(20, 12), mime_type="image/jpeg", name="p.jpg")
    )
    form = FilePart(await blobs.put(b"%PDF-1.7 form", mime_type="application/pdf", name="f.pdf"))
    async with SqliteStore(folder / "bot.db") as store:
        session = await store.active_session(
            channel="telegram", conversation_key=f"telegram:{CHAT}", user_id=str(CHAT)
        )
        earlier = [
            Message("user", EARLIER, parts=(photo, form)),
            Message("assistant", "Thanks, both received."),
        ]
        await store.append_messages(session, "t-earlier", earlier)
    return photo, form


def _serve(folder: Path, fake: FakeBotAPI, model: FakeOpenAI) -> subprocess.Popen[bytes]:
    personas = folder / "personas"
    personas.mkdir(exist_ok=True)
    (personas / "default.md").write_text(PERSONA)
    config = {
        "server": {"port": 0},
        "storage": {"path": str(folder / "bot.db")},
        "personas": {"dirs": [str(personas)]},
        # the images and PDFs go to the model as they are (a local server is text-only else)
        "llm": llm_config("openai", model, max_retries=0, first_token_timeout_s=60)
        | {"media": ["image", "file"]},
        # create_payment asks for approval first (bot/approvals/): here it is about the call
        "approvals": {"exempt": ["create_payment"]},
        "tools": {
            "payment": {
                "prices": {"ASSESSMENT": {"GENERAL": 100}},
                "provider_url": "https://pay.example/{order_id}",
            }
        },
        "channels": {
            "telegram": {
                "enabled": True,
                "token": TOKEN,
                "api_base": fake.url,
                "private_edit_interval_s": 0.05,
            }
        },
    }
    path = folder / "config.yaml"
    path.write_text(json.dumps(config))
    with (folder / "serve.log").open("ab") as log:  # the child keeps its own descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "bot", "serve", "--config", str(path)],
            cwd=folder,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def _turns(folder: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(folder / "bot.db") as db:
        return db.execute("select status, resume_attempts from turns").fetchall()


def _rows(folder: Path, sql: str) -> list[tuple[str, ...]]:
    with sqlite3.connect(folder / "bot.db") as db:
        return db.execute(sql).fetchall()


def _shown(content: str | list[dict[str, Any]]) -> tuple[str, list[str]]:
    """A user message's text and the kinds of its media parts, as Chat Completions got it."""
    if isinstance(content, str):
        return content, []
    text = "\n".join(part["text"] for part in content if part["type"] == "text")
    return text, [part["type"] for part in content if part["type"] != "text"]


def _parts_of(folder: Path, turn_id: str) -> list[str | None]:
    with sqlite3.connect(folder / "bot.db") as db:
        sql = "select parts from messages where turn_id = ? order by id"
        return [row[0] for row in db.execute(sql, (turn_id,))]


async def test_a_killed_turn_with_media_in_its_history_is_resumed_into_its_placeholder(
    tmp_path: Path, servers: tuple[FakeBotAPI, FakeOpenAI]
) -> None:
    fake, model = servers
    photo, form = await _earlier_turn(tmp_path)
    model.add(Reply(calls=[PAY]), Reply(stall_after=0))  # ordered, then "thinking" until killed
    file_id = fake.add_file(RECEIPT, "photos/file_7.jpg")
    size = {"file_id": file_id, "file_unique_id": "r7", "width": 800, "height": 600}
    update = fake.message(CHAT, None, photo=[size | {"file_size": len(RECEIPT)}], caption=ASK)
    fake.push(update)
    first = _serve(tmp_path, fake, model)
    try:
        await model.wait_requests(2, timeout=START_S)
    finally:
        os.kill(first.pid, signal.SIGKILL)
        await asyncio.to_thread(first.wait)
    placeholder = fake.ok(CHAT, "sendMessage")[0]
    placeholder_id = placeholder.message_id
    assert placeholder.params["text"] == "Thinking…" and placeholder_id is not None

    model.add(Reply(text=[ANSWER]))
    second = _serve(tmp_path, fake, model)
    try:
        done = lambda: fake.messages.get((CHAT, placeholder_id)) == ANSWER  # noqa: E731
        await fake.wait_for(done, START_S)
        await until(lambda: _turns(tmp_path) == [("completed", 1)])  # its end is recorded
    finally:
        second.send_signal(signal.SIGINT)
        await asyncio.to_thread(second.wait, START_S)

    assert len(model.requests) == 3
    receipt_url = "data:image/jpeg;base64," + base64.b64encode(RECEIPT).decode()
    for request in (model.requests[0], model.requests[2]):  # before the kill, and resumed
        users = [
            m["content"]
            for m in request.body["messages"]
            if m["role"] == "user" and _shown(m["content"])[0] != FOLLOW_UP
        ]
        # the media of the history and of the turn go to the model again after the kill
        assert _shown(users[0]) == (EARLIER, ["image_url", "file"])
        assert _shown(users[-1]) == (ASK, ["image_url"])
        assert users[-1][-1]["image_url"]["url"] == receipt_url
    resumed = model.requests[2].body["messages"]
    assert len([m for m in resumed if m["role"] == "tool"]) == 1  # replayed, not paid again
    # the QR code the replayed result carries follows it, as the model takes images
    assert resumed[-1]["role"] == "user" and _shown(resumed[-1]["content"]) == (
        FOLLOW_UP,
        ["image_url"],
    )
    assert _parts_of(tmp_path, "t-earlier") == [parts_to_json((photo, form)), None]
    [turn_id] = [row[0] for row in _rows(tmp_path, "select id from turns")]
    own = _parts_of(tmp_path, turn_id)
    # the turn's photo on its message, the payment's QR code on the tool's result, once each
    made = [json.loads(parts) for parts in own[1:] if parts is not None]
    assert own[0] is not None and [[p["source"] for p in m] for m in made] == [
        ["tool:create_payment"]
    ]
    [receipt] = json.loads(own[0])  # the turn's photo, fetched once, kept by reference
    assert (receipt["type"], receipt["blob_id"]) == ("image", blob_id_of(RECEIPT))
    blobs = DiskBlobStore(tmp_path / "data" / "media", max_bytes=20_000_000)
    assert (await blobs.get(receipt["blob_id"]))[1] == RECEIPT
    assert fake.downloads == ["photos/file_7.jpg"]  # not fetched again on resume
    assert len(fake.ok(CHAT, "sendMessage")) == 1  # one placeholder, the answer in it
