"""The widget's chrome: who speaks and when beside each bubble, the persona's welcome and
suggested questions in an empty conversation (no `data-greeting`), every button named."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.providers.scripted import Reply, ScriptedProvider
from tests.widget_kit import BOT, CHROMIUM, MakeWorld, chromium, worlds

pytest.importorskip("playwright.async_api", reason="playwright is not installed")
pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="no system Chromium (apt-get install chromium); .ci/run installs it",
    ),
]
DEFAULT = """---
name: default
description: The shop's helper.
tools: []
display_name: Shop assistant
welcome: Welcome to the shop! Ask about orders and returns.
suggestions: ["Where is my order?", "How do I return a parcel?"]
---
You help the shop's customers.
"""
# every button's accessible name: its aria-label, else its text
NAMES_JS = """() => Array.from(document.querySelector('chat-gateway-widget').shadowRoot
  .querySelectorAll('button')).map((b) => (b.getAttribute('aria-label') || b.textContent).trim())"""


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[MakeWorld]:
    async with worlds(tmp_path) as make:
        yield make


async def test_the_personas_welcome_and_suggestions_then_names_and_times(
    world: MakeWorld, tmp_path: Path
) -> None:
    folder = tmp_path / "personas"
    folder.mkdir()
    (folder / "default.md").write_text(DEFAULT)
    w = await world(
        ScriptedProvider([Reply("It left the warehouse on 2026-12-01.")]),
        personas={"dirs": [str(folder)]},
        greeting="",  # no data-greeting: the persona's welcome
        mode="inline",
        target="#chat",
    )
    async with chromium() as browser:
        page = await browser.new_page()
        await page.goto(w.site.url)
        await page.wait_for_selector(".cgw-greeting >> text=Welcome to the shop!")
        greeting = page.locator(".cgw-greeting")
        assert await greeting.locator(".cgw-from-name").inner_text() == "Shop assistant"
        suggestions = greeting.locator(".cgw-suggestion")
        assert await suggestions.all_inner_texts() == [
            "Where is my order?",
            "How do I return a parcel?",
        ]
        names = await page.evaluate(NAMES_JS)
        assert all(names) and "New conversation" in names, names

        await suggestions.first.click()  # a suggestion is sent as the visitor's question
        await page.wait_for_selector(f"{BOT}:not(.cgw-pending)")
        assert await page.locator(".cgw-user").all_inner_texts() == ["Where is my order?"]
        assert await page.locator(".cgw-suggestion").count() == 0  # gone once used
        bot = page.locator(BOT)
        assert await bot.locator(".cgw-from-name").inner_text() == "Shop assistant"
        stamp = await bot.locator(".cgw-from time").get_attribute("datetime")
        assert stamp is not None and stamp.endswith("Z")
        assert await page.locator(".cgw-row-user .cgw-meta time").count() == 1
        assert await bot.locator(".cgw-body").inner_text() == "It left the warehouse on 2026-12-01."


async def test_without_greeting_or_welcome_the_panel_is_not_blank(world: MakeWorld) -> None:
    w = await world(ScriptedProvider([]), greeting="", title="Help", mode="inline", target="#chat")
    async with chromium() as browser:
        page = await browser.new_page()
        await page.goto(w.site.url)
        await page.wait_for_selector("#chat .cgw-state:has-text('Online')")
        greeting = page.locator(".cgw-greeting")
        assert await greeting.locator(".cgw-body").inner_text() == "Hello! How can I help you?"
        assert await greeting.locator(".cgw-from-name").inner_text() == "Help"  # the title
        assert await page.locator(".cgw-suggestion").count() == 0
