"""The widget sends the page's language in its hello, so the gateway's own texts follow the page:
in Debian's Chromium, on a site of another origin."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.providers.scripted import ScriptedProvider
from content.texts import t
from tests.widget_kit import BOT, CHROMIUM, MakeWorld, chromium, say, worlds

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


async def test_a_french_page_gets_the_gateways_texts_in_french(world: MakeWorld) -> None:
    w = await world(ScriptedProvider([]), lang="fr-FR")
    async with chromium() as browser:
        page = await browser.new_page()
        await page.goto(w.site.url)
        await page.click(".cgw-launcher")
        await page.wait_for_selector(".cgw-state:has-text('En ligne')")  # the widget's own French
        await say(page, "/new")
        answer = page.locator(f"{BOT}:not(.cgw-pending) .cgw-body")
        await answer.wait_for(timeout=10_000)
        assert await answer.inner_text() == t("fr", "command.started_new")
