"""Files stay in their conversation, through the running app and the widget's socket: `/new`
starts a history without the old conversation's files, and another visitor's transcript, replay
and messages never name (or link) a file of someone else's."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from agent.providers.scripted import Reply, ScriptedProvider
from bot.runtime.app import App
from content.parts import ImagePart
from tests.blob_kit import png
from tests.conftest import ORIGIN, Running, WsClient, connect

PICTURE = png(12, 9, "purple")


async def upload(
    session: aiohttp.ClientSession, app: App, ready: dict[str, Any], name: str
) -> dict[str, Any]:
    form = aiohttp.FormData()
    form.add_field("file", PICTURE, filename=name, content_type="image/png")
    headers = {"Authorization": f"Bearer {ready['upload']['token']}", "Origin": ORIGIN}
    async with session.post(app.url + ready["upload"]["url"], data=form, headers=headers) as r:
        assert r.status == 201, await r.text()
        attachment: dict[str, Any] = (await r.json())["attachment"]
        return attachment


async def send(client: WsClient, text: str, attachments: list[dict[str, Any]], answer: str) -> None:
    await client.send(type="message", text=text, attachments=attachments)
    await client.until(
        lambda f: f["type"] == "message.completed" and f["text"] == answer, timeout=15
    )


def parts_in(provider: ScriptedProvider, request: int) -> list[Any]:
    return [part for m in provider.requests[request].messages for part in m.parts]


async def test_new_does_not_carry_the_old_conversations_files(
    running: Running, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("A purple picture."), Reply("Nothing attached.")])
    app = await running(provider)
    client = await connect(session, app)
    ready = await client.hello("visitor-files-1")
    attachment = await upload(session, app, ready, "old.png")
    await send(client, "what is this?", [attachment], "A purple picture.")
    assert [type(p) for p in parts_in(provider, 0)] == [ImagePart]
    await client.send(type="message", text="/new")
    await client.until_type("conversation.cleared", timeout=15)
    await send(client, "what did I send you?", [], "Nothing attached.")
    assert parts_in(provider, 1) == []  # neither the image nor its turn is in the new history
    assert "what is this?" not in json.dumps([m.content for m in provider.requests[1].messages])
    await client.ws.close()
    again = await connect(session, app)  # a reload: the stored transcript after /new
    await again.hello("visitor-files-1", resume_after=0)
    await again.seen(lambda f: f.get("text") == "Nothing attached.", timeout=15)
    assert attachment["blob_id"] not in json.dumps(again.frames)
    await again.ws.close()


async def test_another_visitor_never_sees_a_file_of_someone_elses(
    running: Running, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("Got it."), Reply("Hello.")])
    app = await running(provider)
    owner = await connect(session, app)
    attachment = await upload(session, app, await owner.hello("visitor-owner"), "mine.png")
    await send(owner, "keep this", [attachment], "Got it.")
    other = await connect(session, app)
    await other.hello("visitor-other", resume_after=0)
    await other.send(type="message", text="hi", attachments=[attachment])  # replayed by hand
    error = await other.until_type("error")
    assert error["code"] == "attachment_invalid"
    await send(other, "hi", [], "Hello.")
    assert parts_in(provider, 1) == []
    assert attachment["blob_id"] not in json.dumps(other.frames)
    await owner.ws.close()
    await other.ws.close()
