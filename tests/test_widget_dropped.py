"""The widget shows a message a stop dropped from the queue as not sent (`message.dropped`), in
words a screen reader reads, and again after a reload (the frame replays)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.providers.scripted import Reply, ScriptedProvider
from tests.agents_kit import TASK, Probe, Router, dispatch, registry_with, write_personas
from tests.widget_kit import BOT, CHROMIUM, CONTRAST_JS, MakeWorld, chromium, say, shot, worlds

pytest.importorskip("playwright.async_api", reason="playwright is not installed")
pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="no system Chromium (apt-get install chromium); .ci/run installs it",
    ),
]
DROPPED = ".cgw-row-user[data-state='dropped']"


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[MakeWorld]:
    async with worlds(tmp_path) as make:
        yield make


async def test_a_message_a_stop_dropped_shows_as_not_sent(world: MakeWorld, tmp_path: Path) -> None:
    probe = Probe()
    router = Router(
        default=[Reply(calls=[dispatch("specialist-a", TASK)]), Reply("never")],
        specialist_a=[Reply(calls=[("slow_tool", {})]), Reply("never either")],
    )
    folder = write_personas(tmp_path / "personas")
    w = await world(
        ScriptedProvider(router),
        registry=registry_with(probe),
        personas={"dirs": [str(folder)]},
        mode="inline",
        target="#chat",
    )
    async with chromium() as browser:
        page = await browser.new_page()
        await page.goto(w.site.url)
        await page.wait_for_selector("#chat .cgw-state:has-text('Online')")
        await say(page, "A long job")
        await page.wait_for_selector(f"{BOT} .cgw-line[data-status='running']")
        await say(page, "And then this")
        await page.wait_for_selector(".cgw-row-user[data-state='sent'] >> text=And then this")
        await page.locator(".cgw-stop").click()
        dropped = page.locator(DROPPED)
        await dropped.wait_for()
        assert await dropped.locator(".cgw-text").inner_text() == "And then this"
        assert "Not sent: stopped" in await dropped.locator(".cgw-meta").inner_text()
        ratio = await page.eval_on_selector(f"{DROPPED} .cgw-meta span", CONTRAST_JS)
        assert ratio >= 4.5, ratio  # small text: WCAG AA
        live = await page.locator("[aria-live='polite']").text_content() or ""
        assert "Not sent: stopped" in live and "And then this" in live  # read out once
        # the message that was running is not marked: its answer says it was stopped
        assert await page.locator(".cgw-row-user[data-state='sent']").count() == 1
        await shot(page, "12-dropped")
        probe.release.set()

        await page.reload()
        await page.wait_for_selector(f"{DROPPED} >> text=And then this")
        assert await page.locator(DROPPED).count() == 1
