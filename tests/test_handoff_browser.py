"""A handoff in real browsers (headless Chromium): a visitor in the widget asks for a person;
an operator signs in to the admin view, finds them in the waiting list, takes the conversation
and replies; the widget shows "Ana (a person) is replying" and her reply; the visitor's answer
appears live on the operator's page (SSE, the console's own script, no CSP violation); a second
operator's Take is told who has it; on release the widget's banner goes away."""

from __future__ import annotations

from typing import Any

from agent.providers.scripted import Reply, ScriptedProvider
from tests.handoff_kit import ADMIN_TOKEN, Desk, desk  # noqa: F401
from tests.test_widget_browser import ARGS, CHROMIUM, playwright_api, pytestmark, say_in_widget

__all__ = ["desk", "pytestmark"]

WIDGET = "document.querySelector('chat-gateway-widget').shadowRoot"


async def operator(browser: Any, url: str, name: str, errors: list[str]) -> Any:
    context = await browser.new_context()
    page = await context.new_page()
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    await page.goto(url + "/admin/login")
    await page.fill("input[name=token]", ADMIN_TOKEN)
    await page.fill("input[name=name]", name)
    await page.click("button[type=submit]")
    await page.wait_for_url(url + "/admin")
    return page


async def test_widget_visitor_and_admin_operator(desk: Desk) -> None:
    app = await desk.start(ScriptedProvider([Reply("Glad to help again.")]))
    errors: list[str] = []
    async with playwright_api.async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            visitor = await say_in_widget(browser, app.url, "/human my order never came")
            await visitor.wait_for_selector(".cgw-person:has-text('Waiting for a person')")

            ana = await operator(browser, app.url, "Ana", errors)
            await ana.click("nav.sections a:has-text('Handoffs')")
            item = ana.locator("ul.waiting li.handoff")
            await item.wait_for()
            assert "my order never came" in await item.inner_text()
            await item.locator("a").click()
            await ana.wait_for_selector("#take")
            ben = await operator(browser, app.url, "Ben", errors)
            await ben.goto(ana.url)  # Ben opens the same handoff before Ana presses Take
            await ben.fill("#reply-text", "Hello, Ben here")  # a draft: his page stays put
            await ben.wait_for_selector(".live:not([hidden])")
            await ana.click("#take")
            await ana.wait_for_selector("#status:has-text('Ana')")
            await ben.wait_for_selector("#status:has-text('Ana')")  # told live, before he acts
            await ben.click("#take")
            assert "Already taken by Ana" in await ben.inner_text("#said")

            await visitor.wait_for_selector(".cgw-person:has-text('Ana (a person) is replying')")
            await ana.fill("#reply-text", "Hi, I'm Ana. Let me check your order.")
            await ana.click("#reply button[type=submit]")
            await visitor.wait_for_function(
                f"() => {WIDGET}.querySelector('.cgw-log').textContent.includes('Let me check')"
            )
            await ana.wait_for_selector(".live:not([hidden])")  # subscribed to the page's events
            await visitor.fill(".cgw-input", "thank you, it is order 1234")
            await visitor.press(".cgw-input", "Enter")
            await ana.wait_for_selector("#transcript li.role-user:has-text('order 1234')")

            await ana.fill("input[name=note]", "order 1234 re-sent")
            await ana.click("#release")
            await visitor.wait_for_function(
                f"() => {WIDGET}.querySelector('.cgw-person').hidden"
                f" && {WIDGET}.querySelector('.cgw-log').textContent.includes('handed the conversation back')"
            )
            await ana.wait_for_selector("#status:has-text('released')")
            # the layout holds on a phone: no sideways scrolling of the page
            await ana.set_viewport_size({"width": 390, "height": 844})
            await ana.wait_for_function(
                "() => document.documentElement.scrollWidth <= 390", polling=100
            )
            assert await ana.locator("script:not([src='/admin/static/console.js'])").count() == 0
            # Ben's refused Take is the one failed load (409); nothing else, no CSP violation
            assert errors == [
                "Failed to load resource: the server responded with a status of 409 (Conflict)"
            ], errors
        finally:
            await browser.close()
