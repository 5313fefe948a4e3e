"""What the widget's browser tests share: Chromium, a site that embeds the widget, a cuttable link.

A site is a separate aiohttp server (another origin) serving a page whose only tie to the bot is
the widget's `<script>` tag, and recording every request it gets (a tracker image must not be
one of them). The link is a TCP proxy between the browser and the bot that a test can cut and
restore: offline, as the widget sees it.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from agent.providers.base import Provider
from bot.runtime.app import App
from tests.conftest import make_config
from tools.registry import ToolRegistry

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SHOTS = ROOT / "artifacts" / "widget"  # screenshots of the main states; git ignores artifacts/
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
BOT = ".cgw-bot:not(.cgw-greeting)"  # the bot's bubbles, not the widget's own greeting
SHADOW = "document.querySelector('chat-gateway-widget').shadowRoot"
# A host page that tries hard to break whatever it embeds: the widget's Shadow DOM must hold.
HOSTILE_CSS = (
    "* { color: #f0f !important; font-size: 40px !important; font-family: serif !important; }"
    " button { display: none !important; } div { border: 9px dashed orange; }"
)


def embed_page(script_src: str, **data: str) -> str:
    attributes = "".join(
        f' data-{name.replace("_", "-")}="{html.escape(value, quote=True)}"'
        for name, value in data.items()
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>A shop</title><style>{HOSTILE_CSS}</style></head>"
        '<body><h1>A shop that embeds the chat</h1><div id="chat" style="height: 480px"></div>'
        f'<script src="{html.escape(script_src, quote=True)}"{attributes} defer></script>'
        "</body></html>"
    )


class Site:
    """Another origin: `/` is the page given to `serve`; every request path is recorded."""

    def __init__(self) -> None:
        self.page = ""
        self.requests: list[str] = []
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> Site:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self._any)
        self._runner = web.AppRunner(app, shutdown_timeout=1)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _any(self, request: web.Request) -> web.Response:
        self.requests.append(request.path_qs)
        if request.path == "/":
            return web.Response(text=self.page, content_type="text/html")
        return web.Response(status=404)


class Link:
    """A TCP proxy to `target_port`; `cut()` drops every connection and refuses new ones."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.up = True
        self.port = 0
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.StreamWriter] = set()

    async def start(self) -> Link:
        self._server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cut(self) -> None:
        self.up = False
        for writer in list(self._pipes):
            writer.close()

    def restore(self) -> None:
        self.up = True

    async def stop(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.up:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self._pipes |= {writer, up_writer}
        async with asyncio.TaskGroup() as group:
            group.create_task(self._pump(reader, up_writer))
            group.create_task(self._pump(up_reader, writer))

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        self._pipes.discard(writer)
        writer.close()


class World:
    """A bot, a site of another origin that embeds it, and optionally a cuttable link between."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.site = Site()
        self.app: App | None = None
        self.link: Link | None = None

    async def start(
        self,
        provider: Provider | None,
        *,
        allowed: bool = True,
        link: bool = False,
        registry: ToolRegistry | None = None,
        personas: dict[str, Any] | None = None,
        websocket: dict[str, Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sections: dict[str, Any] | None = None,
        **data: str,
    ) -> World:
        """`sections`: more config sections (a model server, MCP servers); `provider` None
        then builds the model from them."""
        await self.site.start()
        origins = [self.site.url] if allowed else ["https://only-this.example"]
        sections = {
            **(sections or {}),
            "channels": {"websocket": {"allowed_origins": origins, **(websocket or {})}},
        }
        if personas:
            sections["personas"] = personas
        config = make_config(self.tmp_path, **sections)
        self.app = App(
            config, base_dir=self.tmp_path, provider=provider, registry=registry, clock=clock
        )
        await self.app.__aenter__()
        bot_url = self.app.url
        if link:
            assert self.app.port is not None
            self.link = await Link(self.app.port).start()
            bot_url = self.link.url
        data = {"title": "Shop help", "greeting": "Hello! How can I help?", **data}
        self.site.page = embed_page(f"{bot_url}/static/widget.js", **data)
        return self

    async def stop(self) -> None:
        if self.link is not None:
            await self.link.stop()
        if self.app is not None:
            await self.app.stop()
        await self.site.stop()


MakeWorld = Callable[..., Awaitable[World]]


@contextlib.asynccontextmanager
async def worlds(tmp_path: Path) -> AsyncIterator[MakeWorld]:
    """`w = await make(provider, **options)` as often as a test needs; all stopped after it."""
    made: list[World] = []

    async def make(provider: Provider | None, **options: Any) -> World:
        made.append(World(tmp_path))
        return await made[-1].start(provider, **options)

    try:
        yield make
    finally:
        for one in made:
            await one.stop()


@contextlib.asynccontextmanager
async def chromium() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            await browser.close()


async def open_chat(page: Any, url: str) -> None:
    await page.goto(url)
    await page.click(".cgw-launcher")
    await page.wait_for_selector(".cgw-state:has-text('Online')")


async def say(page: Any, text: str) -> None:
    await page.fill(".cgw-input", text)
    await page.press(".cgw-input", "Enter")


async def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SHOTS / f"{name}.png"))


# In the page: the contrast ratio of an element's text colour on its (first opaque) background.
CONTRAST_JS = """(el) => {
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map((v) => { v /= 255;
    return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); })
    .reduce((s, v, i) => s + v * [0.2126, 0.7152, 0.0722][i], 0);
  let bg = null;
  for (let n = el; n && !bg; n = n.parentElement || (n.getRootNode() && n.getRootNode().host)) {
    const c = rgb(getComputedStyle(n).backgroundColor);
    if (c.length === 3 || (c.length === 4 && c[3] === 1)) bg = c;
  }
  const a = lum(rgb(getComputedStyle(el).color)), b = lum(bg || [255, 255, 255]);
  return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
}"""
