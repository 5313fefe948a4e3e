"""The widget's files as a site's visitors fetch them: gzipped, revalidated with an ETag."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from adapters.websocket.static import STATIC_DIR, add_page_routes, widget_script


@pytest.fixture
async def base() -> AsyncIterator[str]:
    app = web.Application()
    add_page_routes(app, socket_path="/ws")
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


@pytest.mark.parametrize(
    ("path", "body"),
    [("/static/widget.js", widget_script()), ("/static/widget.css", b"")],
)
async def test_the_widget_is_sent_gzipped_and_revalidated(
    base: str, path: str, body: bytes
) -> None:
    body = body or (STATIC_DIR / "widget.css").read_bytes()
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        async with session.get(base + path, headers={"Accept-Encoding": "gzip"}) as response:
            assert response.status == 200
            assert response.headers["Content-Encoding"] == "gzip"
            raw = await response.read()
            etag = response.headers["ETag"]
        assert gzip.decompress(raw) == body and len(raw) < len(body) / 2
        async with session.get(base + path, headers={"Accept-Encoding": "identity"}) as plain:
            assert "Content-Encoding" not in plain.headers and await plain.read() == body
        async with session.get(base + path, headers={"If-None-Match": etag}) as again:
            assert again.status == 304 and await again.read() == b""
