"""The demo page and the widget's files, served from adapters/static/ by the web app."""

from __future__ import annotations

import html
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final

from aiohttp import web

STATIC_DIR: Final = Path(__file__).resolve().parent.parent / "static"


def add_page_routes(app: web.Application, *, socket_path: str) -> None:
    """`GET /` (the demo page, pointed at `socket_path`) and `GET /static/widget.{js,css}`."""
    page = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
    page = page.replace("__WS_PATH__", html.escape(socket_path, quote=True))
    files = {
        "/": (page.encode(), "text/html"),
        "/static/widget.js": ((STATIC_DIR / "widget.js").read_bytes(), "text/javascript"),
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
    # Read once at start: these files are small and change only with a deploy.
    async def serve(request: web.Request) -> web.Response:
        return web.Response(
            body=body,
            content_type=content_type,
            charset="utf-8",
            headers={"Cache-Control": "no-cache"},
        )

    return serve
