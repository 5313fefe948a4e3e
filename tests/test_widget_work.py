"""The widget shows a specialist's work inside the answer's bubble, and sits inline when asked."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.providers.scripted import Reply, ScriptedProvider
from tests.agents_kit import TASK, Probe, Router, dispatch, registry_with, write_personas
from tests.clock import FakeClock
from tests.widget_kit import BOT, CHROMIUM, SHADOW, MakeWorld, chromium, say, shot, worlds

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
        assert (await running.inner_text()).startswith("Fact finder: moon crew")
        await shot(page, "10-specialist-inline")
        probe.release.set()
        await page.wait_for_selector(f"{BOT}:not(.cgw-pending)", timeout=15_000)
        bot = page.locator(BOT)
        body = await bot.locator(".cgw-body").inner_text()
        assert body == "Armstrong, Aldrin and Collins."  # no status line under the answer
        summary = await bot.locator("details.cgw-used summary").inner_text()
        assert summary == "used: Fact finder"  # its display name, never "specialist-a"
        line = bot.locator("details.cgw-used .cgw-line", has_text="moon crew")
        await page.wait_for_selector(
            f"{BOT} details .cgw-line[data-status='completed']", state="attached"
        )
        assert await line.get_attribute("data-status") == "completed"
        assert await page.locator(".cgw-note").count() == 0  # nothing loose below the bubble


AVATAR = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


async def test_the_tags_options_and_a_signed_user(world: MakeWorld) -> None:
    from adapters.websocket import user_hash

    w = await world(
        ScriptedProvider([Reply("Hallo!")]),
        websocket={"identity_secret": "s3cret"},
        position="left",
        lang="de",
        avatar=AVATAR,
        color="#ffd60a",  # light: the text on it must turn dark to stay readable
        title="Hilfe",
        user_id="42",
        user_hash=user_hash("s3cret", "42"),
    )
    async with chromium() as browser:
        page = await browser.new_page(viewport={"width": 1280, "height": 720})
        received: list[str | bytes] = []
        page.on("websocket", lambda ws: ws.on("framereceived", lambda f: received.append(f)))
        await page.goto(w.site.url)
        launcher = page.locator(".cgw-launcher")
        await launcher.wait_for()
        assert await launcher.get_attribute("aria-label") == "Chat öffnen"
        box = await launcher.bounding_box()
        assert box is not None and box["x"] < 100  # the left corner
        await launcher.click()
        await page.wait_for_selector(".cgw-state:has-text('Online')")
        assert await page.locator(".cgw-panel").get_attribute("aria-label") == "Hilfe"
        assert await page.locator(".cgw-avatar").get_attribute("src") == AVATAR
        assert (
            await page.locator(".cgw-input").get_attribute("placeholder") == "Nachricht schreiben…"
        )
        on_accent = await page.eval_on_selector(".cgw-title", "e => getComputedStyle(e).color")
        assert on_accent == "rgb(17, 24, 39)"  # near-black on the yellow accent
        await say(page, "Hallo?")
        await page.wait_for_selector(f"{BOT}:has-text('Hallo!')")
        await shot(page, "11-options-signed-user")
    ready = next(json.loads(f) for f in received if '"ready"' in str(f))
    assert ready["conversation_id"] == "u:42"  # the signed user's conversation, on any device


async def test_a_retry_after_too_fast_is_sent_once_with_its_id(world: MakeWorld) -> None:
    provider = ScriptedProvider(lambda request: Reply("ok"))
    clock = FakeClock()  # the rate limit's time stands still while the browser types
    w = await world(provider, websocket={"rate_limit_per_minute": 60}, clock=clock)  # 10, 1 a s
    async with chromium() as browser:
        page = await browser.new_page()
        sent: list[str | bytes] = []
        page.on("websocket", lambda ws: ws.on("framesent", lambda f: sent.append(f)))
        await page.goto(w.site.url)
        await page.click(".cgw-launcher")
        await page.wait_for_selector(".cgw-state:has-text('Online')")
        for n in range(11):
            await say(page, f"message {n}")
        failed = page.locator(".cgw-row-user[data-state='failed']")
        await failed.wait_for()
        assert await failed.locator(".cgw-text").inner_text() == "message 10"
        clock.now += 1.5  # the limit lets one more through each second
        await page.wait_for_timeout(1500)  # and the widget waits out the retry-after it was told
        await failed.locator(".cgw-retry").click()
        await page.wait_for_selector(".cgw-row-user[data-state='failed']", state="detached")
        await page.wait_for_function(
            f"() => {SHADOW}.querySelectorAll('.cgw-row-user[data-state=\"sent\"]').length == 11"
        )
        await page.reload()
        await page.wait_for_selector(".cgw-row-user .cgw-text >> text=message 10")
        texts = await page.locator(".cgw-row-user .cgw-text").all_inner_texts()
        assert texts == [f"message {n}" for n in range(11)]  # each once, in order
    tries = [json.loads(f) for f in sent if '"message 10"' in str(f)]
    assert len(tries) == 2 and tries[0]["client_message_id"] == tries[1]["client_message_id"]
    asked = " ".join(m.content for r in provider.requests for m in r.messages if m.role == "user")
    assert asked.count("message 10") == 1  # the model heard it once
