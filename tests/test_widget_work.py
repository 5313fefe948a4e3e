"""The widget shows a specialist's work inside the answer's bubble, and sits inline when asked."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.providers.scripted import Reply, ScriptedProvider
from tests.agents_kit import TASK, Probe, Router, dispatch, registry_with, write_personas
from tests.widget_kit import BOT, CHROMIUM, MakeWorld, chromium, say, shot, worlds

pytest.importorskip("playwright.async_api", reason="playwright is not installed")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no system Chromium (apt-get install chromium); .ci/run installs it"
)


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[MakeWorld]:
    async with worlds(tmp_path) as make:
        yield make


async def test_a_specialists_line_is_in_the_bubble_and_folds_under_the_answer(
    world: MakeWorld, tmp_path: Path
) -> None:
    probe = Probe()
    router = Router(
        default=[
            Reply(calls=[dispatch("specialist-a", TASK, description="moon crew")]),
            Reply("Armstrong, **Aldrin** and Collins."),
        ],
        specialist_a=[Reply(calls=[("slow_tool", {})]), Reply("Crew: Armstrong, Aldrin, Collins")],
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
        assert await page.locator(".cgw-launcher").count() == 0  # inline: no launcher
        box = await page.locator(".cgw-panel").bounding_box()
        chat = await page.locator("#chat").bounding_box()
        assert box is not None and chat is not None
        assert abs(box["height"] - chat["height"]) < 20  # the panel fills the page's element
        await say(page, "Who flew on Apollo 11?")
        running = page.locator(f"{BOT} .cgw-line[data-status='running']", has_text="moon crew")
        await running.wait_for()
        assert "specialist-a" in await running.inner_text()
        await shot(page, "10-specialist-inline")
        probe.release.set()
        await page.wait_for_selector(f"{BOT}:not(.cgw-pending)", timeout=15_000)
        bot = page.locator(BOT)
        body = await bot.locator(".cgw-body").inner_text()
        assert body == "Armstrong, Aldrin and Collins."  # no status line under the answer
        summary = await bot.locator("details.cgw-used summary").inner_text()
        assert summary.startswith("used: ") and "specialist-a" in summary
        line = bot.locator("details.cgw-used .cgw-line", has_text="moon crew")
        await page.wait_for_selector(
            f"{BOT} details .cgw-line[data-status='completed']", state="attached"
        )
        assert await line.get_attribute("data-status") == "completed"
        assert await page.locator(".cgw-note").count() == 0  # nothing loose below the bubble
