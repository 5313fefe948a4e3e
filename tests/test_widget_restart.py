"""The widget after a deploy: the server restarts, the page reloads, the conversation is still there.

In Debian's Chromium, the widget embedded by its script tag on a site of another origin; the bot
is stopped and started again on the same port and database file.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.providers.scripted import Reply, ScriptedProvider
from bot.runtime.app import App
from tests.conftest import make_config
from tests.widget_kit import BOT, CHROMIUM, MakeWorld, World, chromium, open_chat, say, shot, worlds

pytest.importorskip("playwright.async_api", reason="playwright is not installed")
pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="no system Chromium (apt-get install chromium); .ci/run installs it",
    ),
]


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[MakeWorld]:
    async with worlds(tmp_path) as make:
        yield make


async def restart(w: World, provider: ScriptedProvider) -> None:
    """Stop the bot and start it again where the page expects it: same port, same database."""
    assert w.app is not None and w.app.port is not None
    port = w.app.port
    await w.app.stop()
    config = make_config(
        w.tmp_path,
        server={"port": port},
        channels={"websocket": {"allowed_origins": [w.site.url]}},
    )
    w.app = App(config, base_dir=w.tmp_path, provider=provider)
    await w.app.__aenter__()


async def test_after_a_restart_a_reload_shows_the_whole_conversation(world: MakeWorld) -> None:
    provider = ScriptedProvider([Reply("Answer one."), Reply("Answer two."), Reply("Three.")])
    w = await world(provider)
    async with chromium() as browser:
        page = await browser.new_page()
        await open_chat(page, w.site.url)
        await say(page, "question one")
        await page.wait_for_selector(f"{BOT}:not(.cgw-pending):has-text('Answer one.')")
        await say(page, "question two")
        await page.wait_for_selector(f"{BOT}:not(.cgw-pending):has-text('Answer two.')")
        assert w.app is not None
        await w.app.gateway.wait_idle()

        await restart(w, provider)  # a deploy: the replay buffer is gone, the database is not
        await page.reload()
        await page.wait_for_selector(f"{BOT}:has-text('Answer two.')")
        assert await page.locator(".cgw-user").all_inner_texts() == [
            "question one",
            "question two",
        ]
        assert await page.locator(f"{BOT} .cgw-body").all_inner_texts() == [
            "Answer one.",
            "Answer two.",
        ]
        assert await page.locator(".cgw-row-user[data-state='sent']").count() == 2
        live = page.locator(".cgw-sr[aria-live='polite']")
        assert await live.text_content() == ""  # shown again, not announced again
        await shot(page, "10-after-restart")

        await say(page, "question three")  # and it goes on live
        await page.wait_for_selector(f"{BOT}:not(.cgw-pending):has-text('Three.')")
        assert await page.locator(".cgw-user").count() == 3
        assert await live.text_content() == "Three."
    assert len(provider.requests) == 3
