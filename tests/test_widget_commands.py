"""A command typed into the widget ("/stop", "/help") is a quiet line of the conversation, not a
user bubble, and a stop sits above the answer it stopped, live and after a reload."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.providers.scripted import Reply, ScriptedProvider
from tests.widget_kit import BOT, CHROMIUM, MakeWorld, chromium, say, worlds

pytest.importorskip("playwright.async_api", reason="playwright is not installed")
pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="no system Chromium (apt-get install chromium); .ci/run installs it",
    ),
]
# the log's rows in order, each as "user: …", "command: …" or "bot: …"
ROWS_JS = """() => Array.from(document.querySelector('chat-gateway-widget').shadowRoot
  .querySelector('.cgw-log').children).filter((n) => !n.classList.contains('cgw-greeting'))
  .map((n) => (n.classList.contains('cgw-row-command') ? 'command: '
    : n.classList.contains('cgw-row-user') ? 'user: ' : 'bot: ')
    + (n.querySelector('.cgw-text, .cgw-body') || n).textContent.trim())"""


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[MakeWorld]:
    async with worlds(tmp_path) as make:
        yield make


async def test_a_stop_is_a_line_above_the_answer_it_stopped(world: MakeWorld) -> None:
    hold = asyncio.Event()
    w = await world(
        ScriptedProvider([Reply("never shown", wait=hold), Reply("Fresh answer")]),
        mode="inline",
        target="#chat",
    )
    expected = [
        "user: A long job",
        "command: /stop",
        "bot: Stopped.",
        "user: Next",
        "bot: Fresh answer",
    ]
    async with chromium() as browser:
        page = await browser.new_page()
        await page.goto(w.site.url)
        await page.wait_for_selector("#chat .cgw-state:has-text('Online')")
        await say(page, "A long job")
        await page.wait_for_selector(f"{BOT}.cgw-pending")
        await say(page, "/stop")
        await page.wait_for_selector(f"{BOT}:not(.cgw-pending)")
        await say(page, "Next")
        await page.wait_for_selector(f"{BOT}:not(.cgw-pending) >> text=Fresh answer")
        assert await page.evaluate(ROWS_JS) == expected
        assert await page.locator(".cgw-user").all_inner_texts() == ["A long job", "Next"]

        await page.reload()  # the replay: the same order
        await page.wait_for_selector(f"{BOT} >> text=Fresh answer")
        assert await page.evaluate(ROWS_JS) == expected
