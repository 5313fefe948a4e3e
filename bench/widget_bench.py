"""The web widget's weight and time to interactive, in Debian's Chromium (CLI benchmark).

Prints:
- size: widget.js and widget.css as served, raw and gzipped (level 6, what servers use, and 9);
- time to interactive, over `--runs` cold page loads (a new browser context each: no cache) of a
  page on another origin that embeds the widget by its one tag, median and worst:
  `launcher`: from navigation start until the launcher is shown with its CSS and takes a click;
  `chat ready`: from that click (as the page sees it) until the panel is open, connected and
  showing the transcript;
  `DOMContentLoaded` of the host page, for scale.
The bot runs in this process with the scripted model; everything is on loopback, so the times are
the browser's parse, style and script work plus one socket handshake, not network latency.

    .venv/bin/python bench/widget_bench.py [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # runnable from a checkout

from aiohttp import web

from adapters.websocket.static import widget_script
from agent.providers.scripted import ScriptedProvider
from bot.runtime.app import App
from bot.runtime.config import load_config

ROOT = Path(__file__).resolve().parent.parent
STATIC = ROOT / "adapters" / "static"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
LAUNCHER_READY = """() => { const h = document.querySelector('chat-gateway-widget');
  const b = h && h.shadowRoot.querySelector('.cgw-launcher');
  return !!b && h.style.visibility === 'visible' && b.offsetWidth > 0 && performance.now(); }"""
CLICK_TIME = """() => document.querySelector('chat-gateway-widget').addEventListener('click',
  () => { window.clickedAt = window.clickedAt || performance.now(); }, true)"""
CHAT_READY = """() => { const r = document.querySelector('chat-gateway-widget').shadowRoot;
  const s = r.querySelector('.cgw-state');
  return !r.querySelector('.cgw-panel').hidden && s.textContent === 'Online' && performance.now(); }"""


def sizes() -> list[tuple[str, int, int, int]]:
    rows = []
    served = {"widget.js": widget_script(), "widget.css": (STATIC / "widget.css").read_bytes()}
    for name, body in served.items():
        rows.append((name, len(body), len(gzip.compress(body, 6)), len(gzip.compress(body, 9))))
    return rows


class Site:
    """A page on another origin whose only tie to the bot is the widget's tag."""

    def __init__(self) -> None:
        self.bot_url = ""
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/", self.index)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"

    async def index(self, request: web.Request) -> web.Response:
        page = (
            '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>A site</title>'
            f'</head><body><h1>A site</h1><script src="{self.bot_url}/static/widget.js" '
            'data-title="Help" defer></script></body></html>'
        )
        return web.Response(text=page, content_type="text/html")


async def measure(runs: int) -> dict[str, list[float]]:
    from playwright.async_api import async_playwright

    times: dict[str, list[float]] = {"launcher": [], "chat ready": [], "DOMContentLoaded": []}
    site = Site()
    await site.start()  # first: its origin goes into the bot's allowed_origins
    with tempfile.TemporaryDirectory() as tmp:
        config_path = Path(tmp) / "config.yaml"
        config = {
            "server": {"port": 0},
            "storage": {"path": str(Path(tmp) / "bot.db")},
            "personas": {"dirs": [str(ROOT / "personas")]},
            "channels": {"websocket": {"allowed_origins": [site.url]}},
        }
        config_path.write_text(json.dumps(config))  # JSON is YAML
        bot = App(
            load_config(config_path, env={}), base_dir=Path(tmp), provider=ScriptedProvider([])
        )
        await bot.__aenter__()
        site.bot_url = bot.url
        try:
            async with async_playwright() as playwright:
                browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                for _ in range(runs):
                    context = await browser.new_context()  # a cold cache each time
                    page = await context.new_page()
                    await page.goto(site.url)
                    launcher = await page.wait_for_function(LAUNCHER_READY, polling="raf")
                    times["launcher"].append(float(await launcher.json_value()))
                    loaded = (
                        "performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd"
                    )
                    times["DOMContentLoaded"].append(float(await page.evaluate(loaded)))
                    await page.evaluate(CLICK_TIME)  # the click as the page sees it
                    await page.click(".cgw-launcher")
                    ready = await page.wait_for_function(CHAT_READY, polling="raf")
                    clicked = float(await page.evaluate("window.clickedAt"))
                    times["chat ready"].append(float(await ready.json_value()) - clicked)
                    await context.close()
                await browser.close()
        finally:
            await bot.stop()
            if site.runner is not None:
                await site.runner.cleanup()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=20, help="cold page loads to time")
    args = parser.parse_args()
    print("file         raw B   gzip-6 B  gzip-9 B")
    rows = sizes()
    for name, raw, six, nine in rows:
        print(f"{name:<11} {raw:>6} {six:>10} {nine:>9}")
    total = [sum(r[1] for r in rows), sum(r[2] for r in rows), sum(r[3] for r in rows)]
    print(f"{'JS+CSS':<11} {total[0]:>6} {total[1]:>10} {total[2]:>9}")
    if CHROMIUM is None:
        print("no Chromium (apt-get install chromium): time to interactive not measured")
        return
    times = asyncio.run(measure(args.runs))
    print(f"\ntime to interactive over {args.runs} cold loads (ms)   median    worst")
    for name, values in times.items():
        print(f"{name:<40} {statistics.median(values):>9.1f} {max(values):>8.1f}")


if __name__ == "__main__":
    main()
