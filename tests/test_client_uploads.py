"""Files clients upload (the widget's route, the sessions API's `…/files`): who may upload,
which conversation may attach what, and how refusals read. A text-only client sees no change."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from adapters.api.channel import ApiChannel
from adapters.api.keys import KeyRing, hash_key
from adapters.base import ChatRef, InboundMessage, OutboundContent
from adapters.history import StoredMessage
from adapters.rates import LocalInboundRates
from adapters.uploads import UploadRefused, UploadSigner
from adapters.websocket import WebSocketChannel
from content.parts import FilePart
from tests.api_kit import KEY_A
from tests.blob_kit import MemoryBlobs, PlainLinks

ORIGIN = "http://127.0.0.1:8080"
PDF = b"%PDF-1.4 a small file\n%%EOF"


@dataclass
class Site:
    base: str
    http: aiohttp.ClientSession
    inbound: asyncio.Queue[InboundMessage]
    blobs: MemoryBlobs
    channel: Any
    clock: list[float]


async def served(
    channel: Any, blobs: MemoryBlobs, clock: list[float] | None = None
) -> AsyncIterator[Site]:
    app = web.Application()
    channel.install(app)
    runner = web.AppRunner(app, shutdown_timeout=1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    inbound: asyncio.Queue[InboundMessage] = asyncio.Queue()
    run = asyncio.create_task(channel.run(inbound.put))
    http = aiohttp.ClientSession()
    try:
        base = f"http://127.0.0.1:{runner.addresses[0][1]}"
        yield Site(base, http, inbound, blobs, channel, clock or [0.0])
    finally:
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
        await http.close()
        await runner.cleanup()


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    blobs = MemoryBlobs(max_bytes=1000)
    now = [1_000_000.0]  # the signer's clock, moved by the test
    signer = UploadSigner(b"s" * 32, ttl_s=60, clock=lambda: now[0])
    channel = WebSocketChannel(
        allowed_origins=[ORIGIN], blobs=blobs, links=PlainLinks(), uploads=signer
    )
    async for made in served(channel, blobs, now):
        yield made


async def hello(site: Site, visitor: str) -> tuple[aiohttp.ClientWebSocketResponse, dict[str, Any]]:
    ws = await site.http.ws_connect(f"{site.base}/ws", origin=ORIGIN)
    await ws.send_json({"type": "hello", "visitor_id": visitor})
    ready = await ws.receive_json(timeout=5)
    assert ready["type"] == "ready"
    return ws, ready


async def upload(
    site: Site, token: str | None, data: bytes = PDF, origin: str = ORIGIN
) -> aiohttp.ClientResponse:
    form = aiohttp.FormData()
    form.add_field("file", data, filename="a.pdf", content_type="application/pdf")
    headers = {"Origin": origin} | ({"Authorization": f"Bearer {token}"} if token else {})
    response = await site.http.post(f"{site.base}/ws/files", data=form, headers=headers)
    await response.read()
    return response


async def test_ready_offers_uploads_and_a_file_goes_with_a_message(site: Site) -> None:
    ws, ready = await hello(site, "visitor-one")
    assert ready["upload"]["url"] == "/ws/files" and ready["upload"]["max_bytes"] == 1000
    answer = await upload(site, ready["upload"]["token"])
    assert answer.status == 201
    attachment = (await answer.json())["attachment"]
    assert attachment["name"] == "a.pdf" and attachment["mime_type"] == "application/pdf"
    await ws.send_json({"type": "message", "attachments": [attachment], "text": "read it"})
    message = await asyncio.wait_for(site.inbound.get(), 5)
    [part] = message.parts
    assert isinstance(part, FilePart) and (await site.blobs.get(part.blob.blob_id))[1] == PDF
    echo = await ws.receive_json(timeout=5)
    assert echo["type"] == "message.user"
    assert echo["attachments"][0]["url"] == f"/media/{part.blob.blob_id}?name=a.pdf"
    await ws.close()


async def test_one_conversation_cannot_attach_anothers_file(site: Site) -> None:
    ws_a, ready_a = await hello(site, "visitor-aaa")
    ws_b, _ = await hello(site, "visitor-bbb")
    attachment = (await (await upload(site, ready_a["upload"]["token"])).json())["attachment"]
    await ws_b.send_json({"type": "message", "attachments": [attachment]})
    error = await ws_b.receive_json(timeout=5)
    assert error["type"] == "error" and error["code"] == "attachment_invalid"
    changed = attachment | {"mime_type": "image/png"}
    await ws_a.send_json({"type": "message", "attachments": [changed]})
    assert (await ws_a.receive_json(timeout=5))["code"] == "attachment_invalid"
    assert site.inbound.empty()
    await ws_a.close()
    await ws_b.close()


async def test_uploads_need_a_live_token_an_allowed_origin_and_a_small_file(site: Site) -> None:
    ws, ready = await hello(site, "visitor-two")
    token = ready["upload"]["token"]
    assert (await upload(site, None)).status == 401
    assert (await upload(site, token + "x")).status == 401
    assert (await upload(site, token, origin="https://evil.example")).status == 403
    too_large = await upload(site, token, data=bytes(5000))
    assert too_large.status == 413 and "1000 bytes" in (await too_large.json())["error"]
    site.clock[0] += 61  # the token's 60 s are over
    assert (await upload(site, token)).status == 401
    assert not site.blobs.blobs
    await ws.close()


async def test_an_uploads_type_is_its_bytes_not_its_label(site: Site) -> None:
    ws, ready = await hello(site, "visitor-sniff")
    token = ready["upload"]["token"]
    cases = [  # (bytes, declared type, name) -> stored type
        (PDF, "image/png", "a.png", "application/pdf"),
        (b"<html><script>x</script>", "image/png", "a.png", "application/octet-stream"),
        (b"<svg onload='x'/>", "image/svg+xml", "a.svg", "application/octet-stream"),
        (b"\x89PNG\r\n\x1a\n....", "application/octet-stream", "a.bin", "image/png"),
        (b"\x1aE\xdf\xa3 a clip", "audio/webm", "clip.webm", "audio/webm"),
    ]
    for data, declared, name, stored in cases:
        form = aiohttp.FormData()
        form.add_field("file", data, filename=name, content_type=declared)
        headers = {"Origin": ORIGIN, "Authorization": f"Bearer {token}"}
        async with site.http.post(f"{site.base}/ws/files", data=form, headers=headers) as answer:
            assert answer.status == 201
            assert (await answer.json())["attachment"]["mime_type"] == stored, name
    await ws.close()


async def test_uploads_count_against_the_conversations_rate() -> None:
    """Uploads take from the same budget as messages, before the body is read: more tokens
    or sockets buy no more."""
    blobs = MemoryBlobs(max_bytes=1000)
    channel = WebSocketChannel(
        allowed_origins=[ORIGIN],
        blobs=blobs,
        links=PlainLinks(),
        rate_limit_per_minute=2,
        rates=LocalInboundRates(clock=lambda: 100.0),  # time stands still: no refill
    )
    async for site in served(channel, blobs):
        ws, ready = await hello(site, "visitor-fast")
        _, again = await hello(site, "visitor-fast")  # a second socket, a second token
        assert (await upload(site, ready["upload"]["token"])).status == 201
        assert (await upload(site, again["upload"]["token"])).status == 201
        refused = await upload(site, ready["upload"]["token"])
        assert refused.status == 429 and int(refused.headers["Retry-After"]) > 0
        assert "a minute" in (await refused.json())["error"]
        assert len(blobs.blobs) == 1  # the same small file twice: one blob, nothing more
        other, ready_other = await hello(site, "visitor-slow")
        assert (await upload(site, ready_other["upload"]["token"])).status == 201
        await ws.close()
        await other.close()


async def test_a_page_of_an_allowed_origin_may_upload_across_origins(site: Site) -> None:
    preflight = await site.http.options(
        f"{site.base}/ws/files",
        headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"},
    )
    assert preflight.status == 204
    assert preflight.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert "Authorization" in preflight.headers["Access-Control-Allow-Headers"]
    other = await site.http.options(f"{site.base}/ws/files", headers={"Origin": "https://x.io"})
    assert "Access-Control-Allow-Origin" not in other.headers


async def test_an_answers_parts_come_as_links_on_message_completed(site: Site) -> None:
    ws, ready = await hello(site, "visitor-three")
    blob = await site.blobs.put(PDF, mime_type="application/pdf", name="answer.pdf")
    channel_chat = ChatRef("websocket", ready["conversation_id"])
    content = OutboundContent("Here it is", parts=(FilePart(blob),))
    await site.channel.send(channel_chat, content, final=True)
    frames = [json.loads((await ws.receive()).data) for _ in range(2)]
    completed = frames[1]
    assert completed["type"] == "message.completed"
    [attachment] = completed["attachments"]
    assert attachment["url"] == f"/media/{blob.blob_id}?name=answer.pdf"
    assert attachment["name"] == "answer.pdf" and attachment["size"] == len(PDF)
    await ws.close()


async def test_a_server_without_files_says_nothing_of_them() -> None:
    channel = WebSocketChannel(allowed_origins=[ORIGIN])
    async for site in served(channel, MemoryBlobs()):
        ws, ready = await hello(site, "visitor-four")
        assert "upload" not in ready
        await ws.send_json({"type": "message", "attachments": [{"blob_id": "x"}]})
        assert (await ws.receive_json(timeout=5))["code"] == "attachment_invalid"
        await ws.close()


# --- the sessions API ----------------------------------------------------------------------


@pytest.fixture
async def api() -> AsyncIterator[Site]:
    blobs = MemoryBlobs(max_bytes=1000)
    channel = ApiChannel(keys=KeyRing([("a", hash_key(KEY_A))]), blobs=blobs, links=PlainLinks())
    async for made in served(channel, blobs):
        made.http.headers["Authorization"] = f"Bearer {KEY_A}"
        yield made


async def session(site: Site) -> str:
    async with site.http.post(f"{site.base}/api/v1/sessions") as created:
        return f"{site.base}/api/v1/sessions/{(await created.json())['id']}"


async def api_upload(url: str, site: Site, data: bytes = PDF) -> aiohttp.ClientResponse:
    form = aiohttp.FormData()
    form.add_field("file", data, filename="a.pdf", content_type="application/pdf")
    response = await site.http.post(f"{url}/files", data=form)
    await response.read()
    return response


async def test_a_session_cannot_attach_another_sessions_file(api: Site) -> None:
    first, second = await session(api), await session(api)
    uploaded = await api_upload(first, api)
    assert uploaded.status == 201
    attachment = (await uploaded.json())["attachment"]
    body = {"attachments": [attachment]}
    async with api.http.post(f"{second}/messages", json=body) as refused:
        assert refused.status == 403
        assert (await refused.json())["error"]["code"] == "attachment_invalid"
    assert api.inbound.empty()


async def test_an_api_upload_over_the_cap_is_a_clear_413(api: Site) -> None:
    url = await session(api)
    refused = await api_upload(url, api, bytes(5000))
    assert refused.status == 413
    error = (await refused.json())["error"]
    assert error["code"] == "too_large" and "1000 bytes" in error["message"]


async def test_an_api_without_files_answers_uploads_with_404() -> None:
    channel = ApiChannel(keys=KeyRing([("a", hash_key(KEY_A))]))
    async for site in served(channel, MemoryBlobs()):
        site.http.headers["Authorization"] = f"Bearer {KEY_A}"
        refused = await api_upload(await session(site), site)
        assert refused.status == 404
        assert (await refused.json())["error"]["code"] == "no_files"


async def test_the_api_history_shows_an_answers_file_with_a_fresh_link(api: Site) -> None:
    url = await session(api)
    blob = await api.blobs.put(PDF, mime_type="application/pdf", name="answer.pdf")
    chat = ChatRef("api", url.rsplit("/", 1)[1])
    await api.channel.send(chat, OutboundContent("Here it is", parts=(FilePart(blob),)), final=True)
    await api.channel.send(chat, OutboundContent("Words only"), final=True)
    async with api.http.get(f"{url}/messages") as listed:
        answer, words = (await listed.json())["messages"]
    assert (answer["text"], words["text"], words["attachments"]) == ("Here it is", "Words only", [])
    [attachment] = answer["attachments"]
    assert attachment["url"] == f"/media/{blob.blob_id}?name=answer.pdf"
    assert (attachment["type"], attachment["size"]) == ("file", len(PDF))


class OneFileHistory:
    """A stored transcript of one user message with a file."""

    def __init__(self, part: FilePart) -> None:
        self.part = part

    async def recent(self, chat: ChatRef, user_id: str) -> list[StoredMessage]:
        return [StoredMessage("user", "c_1", "my report", (self.part,))]


async def test_the_stored_transcript_shows_a_users_file_with_a_fresh_link() -> None:
    blobs = MemoryBlobs()
    part = FilePart(await blobs.put(PDF, mime_type="application/pdf", name="report.pdf"))
    channel = WebSocketChannel(
        allowed_origins=[ORIGIN], blobs=blobs, links=PlainLinks(), history=OneFileHistory(part)
    )
    async for site in served(channel, blobs):
        ws = await site.http.ws_connect(f"{site.base}/ws", origin=ORIGIN)
        await ws.send_json({"type": "hello", "visitor_id": "visitor-five", "resume_after": 0})
        assert (await ws.receive_json(timeout=5))["type"] == "ready"
        stored = await ws.receive_json(timeout=5)
        assert stored["type"] == "message.user" and stored["history"] is True
        [attachment] = stored["attachments"]
        assert attachment["url"] == f"/media/{part.blob.blob_id}?name=report.pdf"
        await ws.close()


def test_a_reference_with_an_unpaired_surrogate_is_refused_not_a_crash() -> None:
    signer = UploadSigner(b"k" * 32)
    item = {"type": "file", "blob_id": "\ud800", "mime_type": "a/b", "size": 1, "ref": "x"}
    with pytest.raises(UploadRefused) as refused:
        signer.part("v:someone", item)
    assert refused.value.status == 403


def test_a_token_or_ref_of_any_characters_is_refused_not_a_crash() -> None:
    signer = UploadSigner(b"k" * 32)
    assert signer.scope_of("dg.9999999999.é\ud800") is None
    item = {"type": "file", "blob_id": "b", "mime_type": "a/b", "size": 1, "ref": "é"}
    with pytest.raises(UploadRefused):
        signer.part("v:someone", item)


def test_an_attachment_whose_type_is_not_a_string_is_refused() -> None:
    item = {"type": {"a": 1}, "blob_id": "b", "mime_type": "a/b", "size": 1, "ref": "x"}
    with pytest.raises(UploadRefused) as refused:
        UploadSigner(b"k" * 32).part("v:someone", item)
    assert refused.value.status == 400
