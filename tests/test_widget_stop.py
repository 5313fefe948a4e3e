"""The widget's Stop in Chromium: a labelled button while an answer runs; pressing it ends the
work (the fake model sees its stream closed, the MCP server its calls cancelled, the
specialists are killed) and the answer keeps what it showed, marked stopped. While the answer
is written, three dots move (and stay still, fading, under prefers-reduced-motion)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.conftest import db_rows, settled
from tests.stop_kit import STREAMED, WAIT_S, StopModel, log_count, sections
from tests.test_mcp_servers import logged
from tests.widget_kit import BOT, CHROMIUM, MakeWorld, chromium, say, shot, worlds

pytest.importorskip("playwright.async_api", reason="playwright is not installed")
pytestmark = [
    pytest.mark.process,
    pytest.mark.timeout(180),
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="no system Chromium (apt-get install chromium); .ci/run installs it",
    ),
]
ANIMATION_JS = """() => getComputedStyle(document.querySelector('chat-gateway-widget').shadowRoot
  .querySelector('.cgw-pending .cgw-typing i')).animationName"""


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[MakeWorld]:
    async with worlds(tmp_path) as make:
        yield make


async def test_the_stop_button_stops_the_answer_and_keeps_what_it_showed(
    world: MakeWorld, tmp_path: Path
) -> None:
    async with StopModel("answer") as model:
        config = sections(tmp_path, model, tmp_path / "mcp.log")
        w = await world(None, sections=config, mode="inline", target="#chat")
        async with chromium() as browser:
            page = await browser.new_page()
            await page.goto(w.site.url)
            await page.wait_for_selector("#chat .cgw-state:has-text('Online')")
            stop = page.locator(".cgw-stop")
            assert await stop.is_hidden()  # nothing runs: no Stop
            await say(page, "Answer me")
            streamed = "".join(STREAMED)
            await page.wait_for_selector(f"{BOT}.cgw-pending >> text={streamed}")
            assert await page.locator(f"{BOT}.cgw-pending .cgw-typing i").count() == 3
            assert await page.evaluate(ANIMATION_JS) == "cgw-typing"
            await page.emulate_media(reduced_motion="reduce")
            assert await page.evaluate(ANIMATION_JS) == "cgw-typing-still"
            # a labelled button: its words are on it, not only in a tooltip
            assert await stop.is_visible() and (await stop.inner_text()).strip() == "Stop"
            assert await stop.get_attribute("aria-label") == "Stop the answer"
            await shot(page, "stop-running")
            await stop.click()

            await model.wait_closed(1, timeout=WAIT_S)  # the model stream, closed
            done = page.locator(f"{BOT}.cgw-stopped:not(.cgw-pending)")
            await done.wait_for(timeout=WAIT_S * 1000)
            body = done.locator(".cgw-body")
            shown = (await body.inner_text()).strip()
            assert shown.startswith(streamed) and shown.endswith("Stopped."), shown
            mark = body.locator(".cgw-stopped-mark")
            assert (await mark.inner_text()).strip() == "Stopped."
            assert await mark.locator("svg").count() == 1  # the stop icon, not the ⏹ glyph
            assert await done.locator(".cgw-typing").count() == 0
            assert await stop.is_hidden()
            await shot(page, "stopped")
        assert w.app is not None
        await settled(w.app)
        assert model.asked == ["coordinator"]


async def test_the_stop_button_ends_the_tools_and_the_specialists(
    world: MakeWorld, tmp_path: Path
) -> None:
    log = tmp_path / "mcp.log"
    async with StopModel("work") as model:
        w = await world(
            None, sections=sections(tmp_path, model, log), mode="inline", target="#chat"
        )
        assert w.app is not None
        async with asyncio.timeout(WAIT_S):
            await w.app.mcp.servers["demo"].wait_for(lambda s: s.ready)
        async with chromium() as browser:
            page = await browser.new_page()
            await page.goto(w.site.url)
            await page.wait_for_selector("#chat .cgw-state:has-text('Online')")
            await say(page, "Do all the work")
            await model.wait_requests(3, timeout=WAIT_S)
            async with asyncio.timeout(WAIT_S):
                while log_count(log, "slow started") < 2:  # noqa: ASYNC110 (a child's log)
                    await asyncio.sleep(0.02)
            await page.locator(".cgw-stop").click()
            await model.wait_closed(1, timeout=WAIT_S)
            await logged(log, "cancelled slow")
            async with asyncio.timeout(WAIT_S):
                while log_count(log, "cancelled slow") < 2:  # noqa: ASYNC110 (a child's log)
                    await asyncio.sleep(0.02)
            done = page.locator(f"{BOT}.cgw-stopped:not(.cgw-pending)")
            await done.wait_for(timeout=WAIT_S * 1000)
            assert (await done.locator(".cgw-body").inner_text()).strip() == "Stopped."
        await settled(w.app)
        assert {t.status for t in w.app.workers.tasks.values()} == {"killed"}
        assert db_rows(w.app, "select status from turns") == [("stopped",)]
