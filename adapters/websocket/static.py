"""The demo page and the widget's files, served from adapters/static/ by the web app.

`/static/widget.js` is the files of adapters/static/widget/ joined, in order, into one closure
when the app starts: one request for a site, small files for us, and no build step or tool.
"""

from __future__ import annotations

import gzip
import hashlib
import html
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final

from aiohttp import web

STATIC_DIR: Final = Path(__file__).resolve().parent.parent / "static"
# Pure helpers first (node loads markdown.js alone in the tests); the boot call goes last.
WIDGET_PARTS: Final = (
    "markdown.js",
    "dom.js",
    "panel.js",
    "files.js",
    "outbox.js",
    "answers.js",
    "chat.js",
)
WIDGET_HEAD: Final = """/* Chat gateway web widget: one <script> tag, plain JavaScript, no framework.
 *   <script src="https://bot.example.com/static/widget.js" data-title="Help" defer></script>
 * Options: the README ("The web widget"); protocol: docs/websocket-protocol.md.
 * Sources: adapters/static/widget/ (joined in this order when the server starts). */
(function () {
"use strict";
"""


def widget_script() -> bytes:
    """widget.js as served: every part, in one closure that ends by starting the widget."""
    parts = [(STATIC_DIR / "widget" / name).read_text(encoding="utf-8") for name in WIDGET_PARTS]
    return (WIDGET_HEAD + "\n".join(parts) + "\nboot();\n})();\n").encode()


def add_page_routes(app: web.Application, *, socket_path: str) -> None:
    """`GET /` (the demo page, pointed at `socket_path`) and `GET /static/widget.{js,css}`."""
    page = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
    page = page.replace("__WS_PATH__", html.escape(socket_path, quote=True))
    files = {
        "/": (page.encode(), "text/html"),
        "/static/widget.js": (widget_script(), "text/javascript"),
        "/static/widget.css": ((STATIC_DIR / "widget.css").read_bytes(), "text/css"),
    }
    for route, (body, content_type) in files.items():
        app.router.add_get(route, _serve_bytes(body, content_type))
    app.router.add_get("/favicon.ico", _no_icon)  # browsers ask; an empty answer, not a 404


async def _no_icon(request: web.Request) -> web.Response:
    return web.Response(status=204)


def _serve_bytes(
    body: bytes, content_type: str
) -> Callable[[web.Request], Awaitable[web.Response]]:
    # Read and compressed once at start: these files are small and change only with a deploy.
    # `no-cache` with an ETag: every page of a site revalidates (a 304 of no bytes) and a deploy
    # is seen at once; gzip makes the widget about a third of its size on the wire.
    gzipped = gzip.compress(body, 9)
    etag = '"' + hashlib.sha256(body).hexdigest()[:20] + '"'

    async def serve(request: web.Request) -> web.Response:
        headers = {"Cache-Control": "no-cache", "ETag": etag, "Vary": "Accept-Encoding"}
        if etag in request.headers.get("If-None-Match", ""):
            return web.Response(status=304, headers=headers)
        accepts = request.headers.get("Accept-Encoding", "")
        if "gzip" in accepts.lower():
            headers["Content-Encoding"] = "gzip"
        return web.Response(
            body=gzipped if "Content-Encoding" in headers else body,
            content_type=content_type,
            charset="utf-8",
            headers=headers,
        )

    return serve
