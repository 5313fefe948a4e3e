"""The admin view in a real browser (headless Chromium): sign in, conversations, a session tree,
and message text that holds a script shown as text, never run."""

from __future__ import annotations

from pathlib import Path

from aiohttp import ClientSession

from tests.admin_kit import SCRIPT, TOKEN, admin_scene
from tests.conftest import Running
from tests.test_widget_browser import ARGS, CHROMIUM, playwright_api, pytestmark  # noqa: F401


async def test_an_admin_signs_in_and_reads_a_session_tree(
    running: Running, session: ClientSession, tmp_path: Path
) -> None:
    scene = await admin_scene(running, session, tmp_path)
    async with playwright_api.async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = await browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            await page.goto(scene.app.url + "/admin")
            assert page.url.endswith("/admin/login")  # no token yet: the sign-in form
            await page.fill("input[name=token]", "not the token")
            await page.click("button[type=submit]")
            assert await page.locator("#login-failed").is_visible()
            await page.fill("input[name=token]", TOKEN)
            await page.click("button[type=submit]")
            await page.wait_for_url(scene.app.url + "/admin")

            row = page.locator(f"tr.conversation[data-session='{scene.root_session}']")
            assert await row.get_attribute("class") == "conversation failed"
            assert "broken.md:2" in await page.inner_text("ul.persona-errors")
            assert "websocket" in await page.inner_text("table.channels")
            await row.locator("a").click()
            await page.wait_for_selector("section.session")

            root = page.locator(f"section.session[data-session='{scene.root_session}']")
            nested = root.locator("li.call[data-tool='AgentTool'] section.session")
            assert await nested.get_attribute("data-session") == scene.worker_session
            assert await nested.locator("li.call[data-tool='lookup']").count() == 1
            failed = page.locator(f"tr.turn[data-turn='{scene.failed_turn}']")
            assert await failed.get_attribute("class") == "turn failed"
            user_text = root.locator("> ol.messages li.role-user pre.content").first
            assert SCRIPT in await user_text.inner_text()  # shown as text
            # the console's own script, nothing else; no image
            assert (
                await page.locator("script:not([src='/admin/static/console.js']), img").count() == 0
            )
            assert await page.evaluate("() => window.pwned") is None
            assert errors == []
        finally:
            await browser.close()
