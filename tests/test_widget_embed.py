"""The widget as a site owner embeds it: one script tag on another origin, in Debian's Chromium.

Screenshots of the main states go to artifacts/widget/ (git ignores artifacts/).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.providers.scripted import Reply, ScriptedProvider
from tests.widget_kit import (
    BOT,
    CHROMIUM,
    CONTRAST_JS,
    SHADOW,
    MakeWorld,
    chromium,
    open_chat,
    say,
    shot,
    worlds,
)
from tools.base import ToolContext
from tools.builtin import builtin_registry
from tools.registry import ToolRegistry, tool

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


def stock_tool(release: asyncio.Event) -> ToolRegistry:
    @tool
    async def check_stock(ctx: ToolContext, item: str) -> str:
        """Check the stock of an item."""
        await release.wait()
        return f"{item}: 12 in stock"

    registry = builtin_registry()
    registry.add(check_stock)
    return registry


async def test_embedded_on_another_site_it_streams_the_answer_with_a_tool_line(
    world: MakeWorld, tmp_path: Path
) -> None:
    release = asyncio.Event()
    personas = tmp_path / "personas"
    personas.mkdir()
    (personas / "default.md").write_text(
        "---\nname: default\ndescription: d\ntools: [check_stock]\n---\nHi\n"
    )
    answer = "**Tea** is in stock: *twelve* tins, see [the shop](https://shop.example/tea)."
    provider = ScriptedProvider(
        [Reply(calls=[("check_stock", {"item": "tea"})]), Reply(answer, chunks=12, delay_s=0.03)]
    )
    w = await world(
        provider,
        registry=stock_tool(release),
        personas={"dirs": [str(personas)]},
        color="#0f766e",
    )
    async with chromium() as browser:
        page = await browser.new_page()
        await page.goto(w.site.url)
        launcher = page.locator(".cgw-launcher")
        await launcher.wait_for()  # the page hides every <button> and restyles every element
        assert await launcher.is_visible()
        title_size = await page.eval_on_selector(".cgw-title", "e => getComputedStyle(e).fontSize")
        assert title_size == "15px"  # 1rem of the widget's own 15px, not the page's 40px
        await shot(page, "01-launcher")
        await open_chat(page, w.site.url)
        await say(page, "do you have tea?")
        line = page.locator(f"{BOT} .cgw-line[data-status='running']")
        await line.wait_for()
        assert "Checking the stock" in await line.inner_text()
        assert await page.locator(".cgw-row-user[data-state='sent']").count() == 1
        await shot(page, "02-tool-running")
        await page.evaluate(
            f"""() => {{ window.seen = []; const log = {SHADOW}.querySelector('.cgw-log');
            new MutationObserver(() => {{ const b = log.querySelector('{BOT} .cgw-body');
              if (b) window.seen.push(b.textContent); }})
              .observe(log, {{subtree: true, childList: true, characterData: true}}); }}"""
        )
        release.set()
        await page.wait_for_selector(f"{BOT}:not(.cgw-pending)", timeout=10_000)
        seen = await page.evaluate("window.seen")
        assert any("Tea" in text for text in seen[:-1])  # streamed: parts before the end
        assert not [text for text in seen if "*" in text or "](" in text]  # no raw markers
        bot = page.locator(BOT)
        assert await bot.locator("strong").inner_text() == "Tea"
        assert await bot.locator("em").inner_text() == "twelve"
        summary = bot.locator("details.cgw-used summary")
        assert (await summary.inner_text()).startswith("used: Checking the stock")
        assert not await bot.locator("details.cgw-used").evaluate("d => d.open")
        live = await page.locator(".cgw-sr[aria-live='polite']").inner_text()
        assert "Tea is in stock" in live  # the finished answer is announced
        await shot(page, "03-answered")
    assert len(provider.requests) == 2


async def test_the_launcher_and_panel_work_by_mouse_and_keyboard_with_readable_colours(
    world: MakeWorld,
) -> None:
    w = await world(ScriptedProvider([Reply("Hello back.")]))
    async with chromium() as browser:
        page = await browser.new_page()
        await page.goto(w.site.url)
        launcher = page.locator(".cgw-launcher")
        panel = page.locator(".cgw-panel")
        await launcher.wait_for()
        await page.keyboard.press("Tab")  # keyboard: the launcher is the first stop
        focused = f"() => {SHADOW}.activeElement && {SHADOW}.activeElement.className"
        assert "cgw-launcher" in await page.evaluate(focused)
        outline = await launcher.evaluate("b => getComputedStyle(b).outlineStyle")
        assert outline != "none"  # visible focus
        await page.keyboard.press("Enter")
        await panel.wait_for(state="visible")
        assert "cgw-input" in await page.evaluate(focused)  # focus goes to the input
        await page.keyboard.type("hi there")
        await page.keyboard.press("Enter")
        await page.wait_for_selector(f"{BOT}:has-text('Hello back.')")
        await page.keyboard.press("Escape")
        await panel.wait_for(state="hidden")
        assert "cgw-launcher" in await page.evaluate(focused)  # and back to the launcher
        assert await launcher.get_attribute("aria-expanded") == "false"

        await launcher.click()  # mouse: open, and close with the close button
        await panel.wait_for(state="visible")
        assert await launcher.get_attribute("aria-expanded") == "true"
        await page.click(".cgw-close")
        await panel.wait_for(state="hidden")
        await launcher.click()
        await panel.wait_for(state="visible")
        assert await panel.get_attribute("role") == "dialog"
        for selector in [
            ".cgw-title",
            ".cgw-state",
            ".cgw-greeting .cgw-body",
            ".cgw-user",
            ".cgw-meta",
            f"{BOT} .cgw-body",
            ".cgw-input",
        ]:
            ratio = await page.eval_on_selector(selector, CONTRAST_JS)
            assert ratio >= 4.5, f"{selector}: contrast {ratio:.2f} is below WCAG AA"
        icons = await page.eval_on_selector_all(".cgw-panel button svg", "s => s.length")
        assert icons >= 3  # icons are inline SVG, not emoji


async def test_reload_and_a_second_tab_show_the_same_transcript_and_new_clears_both(
    world: MakeWorld,
) -> None:
    provider = ScriptedProvider([Reply("Answer one."), Reply("Answer two.")])
    w = await world(provider)
    async with chromium() as browser:
        context = await browser.new_context()
        page = await context.new_page()
        await open_chat(page, w.site.url)
        await say(page, "question one")
        await page.wait_for_selector(f"{BOT}:not(.cgw-pending):has-text('Answer one.')")
        await page.reload()  # the panel stays open across pages of the session
        await page.wait_for_selector(f"{BOT}:has-text('Answer one.')")
        assert await page.locator(".cgw-user").all_inner_texts() == ["question one"]

        other = await context.new_page()  # a second tab, or another page of the site
        await open_chat(other, w.site.url)
        await other.wait_for_selector(f"{BOT}:has-text('Answer one.')")
        await say(other, "question two")
        await page.wait_for_selector(f"{BOT}:has-text('Answer two.')")  # live in the first tab
        for tab in (page, other):
            users = await tab.locator(".cgw-user").all_inner_texts()
            assert users == ["question one", "question two"]
            assert await tab.locator(f"{BOT}").count() == 2
        await shot(other, "04-second-tab")

        await page.click(".cgw-new")
        for tab in (page, other):
            await tab.wait_for_selector(f"{BOT}:has-text('Started a new conversation')")
            assert await tab.locator(".cgw-user").count() == 0
            assert await tab.locator(".cgw-greeting").count() == 1
    assert len(provider.requests) == 2


async def test_a_message_typed_offline_is_queued_then_delivered_once(
    world: MakeWorld,
) -> None:
    provider = ScriptedProvider([Reply("First."), Reply("Got it.")])
    w = await world(provider, link=True)
    assert w.link is not None
    async with chromium() as browser:
        page = await browser.new_page()
        await open_chat(page, w.site.url)
        await say(page, "first")
        await page.wait_for_selector(f"{BOT}:has-text('First.')")
        w.link.cut()
        await page.wait_for_selector(".cgw-state:has-text('Reconnecting')")
        await say(page, "typed offline")
        queued = page.locator(".cgw-row-user[data-state='queued']")
        await queued.wait_for()
        assert "queued" in (await queued.locator(".cgw-meta").inner_text()).lower()
        await shot(page, "05-queued-offline")
        w.link.restore()
        await page.wait_for_selector(f"{BOT}:has-text('Got it.')", timeout=20_000)
        assert await page.locator(".cgw-row-user[data-state='sent']").count() == 2
        await page.reload()
        await page.wait_for_selector(f"{BOT}:has-text('Got it.')")
        assert await page.locator(".cgw-user").all_inner_texts() == ["first", "typed offline"]
    assert [r.messages[-1].content for r in provider.requests] == ["first", "typed offline"]


async def test_a_refused_origin_is_said_once_and_not_retried(
    world: MakeWorld,
) -> None:
    w = await world(ScriptedProvider([]), allowed=False)
    async with chromium() as browser:
        page = await browser.new_page()
        sockets: list[str] = []
        errors: list[str] = []
        page.on("websocket", lambda ws: sockets.append(ws.url))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        await page.goto(w.site.url)
        await page.click(".cgw-launcher")
        banner = page.locator(".cgw-banner")
        await banner.wait_for()
        assert "not enabled on this site" in await banner.inner_text()
        assert await page.locator(".cgw-input").is_disabled()
        await shot(page, "06-refused-origin")
        await page.wait_for_timeout(2500)  # a retry would come within 0.75 s, then 1.5 s
        assert len(sockets) == 1
        fixes = [e for e in errors if "allowed_origins" in e]
        assert len(fixes) == 1 and w.site.url in fixes[0]


async def test_a_refused_identity_is_said_once(world: MakeWorld) -> None:
    w = await world(ScriptedProvider([]), user_id="42", user_hash="not-the-hmac")
    async with chromium() as browser:
        page = await browser.new_page()
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        await page.goto(w.site.url)
        await page.click(".cgw-launcher")
        banner = page.locator(".cgw-banner")
        await banner.wait_for()
        assert "sign-in could not be verified" in await banner.inner_text()
        assert [e for e in errors if "HMAC-SHA256(identity_secret, user_id)" in e]


async def test_too_long_and_too_fast_messages_fail_with_their_reason_and_a_retry(
    world: MakeWorld,
) -> None:
    provider = ScriptedProvider([Reply("Fine."), Reply("never")])
    limits = {"max_text_chars": 40, "rate_limit_per_minute": 1}
    w = await world(provider, websocket=limits)
    async with chromium() as browser:
        page = await browser.new_page()
        await open_chat(page, w.site.url)
        await say(page, "x" * 41)
        failed = page.locator(".cgw-row-user[data-state='failed']")
        await failed.wait_for()
        assert "too long (at most 40 characters)" in await failed.inner_text()
        await say(page, "short one")
        await page.wait_for_selector(f"{BOT}:has-text('Fine.')")
        await say(page, "and another")  # over the rate limit: one a minute
        await page.wait_for_selector(".cgw-row-user[data-state='failed'] >> text=too fast")
        assert await page.locator(".cgw-row-user[data-state='failed'] .cgw-retry").count() == 2
        await shot(page, "07-failed")
    assert len(provider.requests) == 1


async def test_on_a_phone_the_panel_is_full_screen(world: MakeWorld) -> None:
    w = await world(ScriptedProvider([]))
    async with chromium() as browser:
        context = await browser.new_context(
            viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True
        )
        page = await context.new_page()
        await open_chat(page, w.site.url)
        box = await page.locator(".cgw-panel").bounding_box()
        assert box == {"x": 0, "y": 0, "width": 390, "height": 844}
        assert not await page.locator(".cgw-launcher").is_visible()  # the panel closes itself
        await shot(page, "08-phone")


async def test_a_hostile_answer_runs_nothing_and_loads_nothing(
    world: MakeWorld,
) -> None:
    site_tracker = "/tracker.png?q=secret"
    answer = (
        '<img src=x onerror="window.pwned=1"> <script>window.pwned=2</script> '
        '[click me](javascript:window.pwned=3) <a href="javascript:window.pwned=4">x</a> '
        f"![t](TRACKER{site_tracker}) [ok](https://example.com/ok)"
    )
    provider = ScriptedProvider([])
    w = await world(provider)
    provider.add(Reply(answer.replace("TRACKER", w.site.url)))
    async with chromium() as browser:
        page = await browser.new_page()
        dialogs: list[str] = []
        page.on("dialog", lambda d: dialogs.append(d.message))
        await open_chat(page, w.site.url)
        await say(page, "be evil")
        await page.wait_for_selector(f"{BOT}:not(.cgw-pending)")
        await shot(page, "09-hostile-answer")
        assert await page.evaluate("window.pwned") is None
        assert dialogs == []
        assert await page.locator(".cgw-panel img").count() == 0
        assert not [path for path in w.site.requests if "tracker" in path]
        links = page.locator(f"{BOT} a")
        assert await links.count() == 1
        assert await links.get_attribute("href") == "https://example.com/ok"
        assert await links.get_attribute("rel") == "noopener noreferrer nofollow"
        assert "onerror" in await page.locator(f"{BOT} .cgw-body").inner_text()  # as text
