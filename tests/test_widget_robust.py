"""The widget against what others write: a site owner's broken `data-target`, a model's call ids."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from agent.providers.scripted import Reply, Script, ScriptedProvider
from agent.types import ModelRequest, ModelStream, ToolCallEvent
from tests.widget_kit import BOT, CHROMIUM, MakeWorld, chromium, open_chat, say, worlds

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


class CallIds(ScriptedProvider):
    """The scripted model, its tool calls given these ids: a model picks them, any string."""

    def __init__(self, script: Script, ids: list[str]) -> None:
        super().__init__(script)
        self._ids = iter(ids)

    async def stream(self, request: ModelRequest) -> ModelStream:
        async for event in super().stream(request):
            if isinstance(event, ToolCallEvent):
                event = ToolCallEvent(replace(event.call, id=next(self._ids)))
            yield event


@pytest.mark.parametrize("target", ["#chat[", "::nonsense"])
async def test_a_target_that_is_no_selector_leaves_the_widget_floating_with_one_warning(
    world: MakeWorld, target: str
) -> None:
    w = await world(ScriptedProvider([Reply("Hello from the float.")]), target=target)
    async with chromium() as browser:
        page = await browser.new_page()
        warnings: list[str] = []
        errors: list[str] = []
        page.on("console", lambda m: warnings.append(m.text) if m.type == "warning" else None)
        page.on("pageerror", lambda error: errors.append(str(error)))
        await open_chat(page, w.site.url)  # the launcher is there, and opens the panel
        await say(page, "hi")
        await page.wait_for_selector(f"{BOT}:not(.cgw-pending)", timeout=10_000)
        assert "Hello from the float." in await page.locator(BOT).inner_text()
        assert await page.locator("#chat chat-gateway-widget").count() == 0
        assert await page.locator(".cgw-root.cgw-floating").count() == 1
        assert not errors
    [warning] = [text for text in warnings if "data-target" in text]
    assert target in warning


async def test_tool_lines_keyed_by_any_call_id_show_and_fold(world: MakeWorld) -> None:
    provider = CallIds(
        [
            Reply(calls=[("get_current_datetime", {}), ("get_current_datetime", {})]),
            Reply("It is late."),
        ],
        ids=["__proto__", "constructor"],
    )
    w = await world(provider)
    async with chromium() as browser:
        page = await browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        await open_chat(page, w.site.url)
        await say(page, "what time is it?")
        await page.wait_for_selector(f"{BOT}:not(.cgw-pending)", timeout=10_000)
        bot = page.locator(BOT)
        assert "It is late." in await bot.locator(".cgw-body").inner_text()
        lines = bot.locator(".cgw-line[data-status='completed']")
        assert await lines.count() == 2  # one per call, whatever its id
        summary = await bot.locator("details.cgw-used summary").inner_text()
        assert summary.startswith("used: ") and "date and time" in summary
        assert not errors
