"""The admin view as operators use it over HTTP: the waiting list, Take / reply / Release with
CSRF tokens, the second Take told who has it (409), "take over" of a bot conversation, every
action audited, and the live event stream."""

from __future__ import annotations

import re

import aiohttp
from aiohttp import ClientSession, CookieJar

from agent.providers.scripted import Reply, ScriptedProvider
from bot.runtime.app import App
from tests.conftest import db_rows
from tests.handoff_kit import ADMIN_TOKEN, Desk, desk, until  # noqa: F401

__all__ = ["desk"]


async def signed_in(app: App, name: str) -> ClientSession:
    session = ClientSession(cookie_jar=CookieJar(unsafe=True))
    async with session.post(
        f"{app.url}/admin/login", data={"token": ADMIN_TOKEN, "name": name}, allow_redirects=False
    ) as response:
        assert response.status == 303
    return session


async def page(session: ClientSession, url: str) -> tuple[int, str]:
    async with session.get(url) as response:
        return response.status, await response.text()


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert found, html
    return found.group(1)


async def test_operators_take_reply_release_in_the_admin_view(desk: Desk) -> None:
    provider = ScriptedProvider([Reply("The bot is back.")])
    app = await desk.start(provider)
    await desk.user_says("/human please, my parcel is lost")
    await desk.user_sees("asked a person to take over")
    ana, ben = await signed_in(app, "Ana"), await signed_in(app, "Ben <b>")
    try:
        status, listing = await page(ana, f"{app.url}/admin/handoffs")
        assert status == 200 and "my parcel is lost" in listing
        [handoff_id] = re.findall(r'data-handoff="([0-9a-f]{32})"', listing)
        url = f"{app.url}/admin/handoffs/{handoff_id}"
        _, html = await page(ana, url)
        csrf = csrf_of(html)
        _, html_ben = await page(ben, url)

        # no CSRF token, a wrong one, or another site's form: refused, nothing happens
        async with ana.post(f"{url}/take", data={}, allow_redirects=False) as response:
            assert response.status == 403
        async with ana.post(f"{url}/take", data={"csrf": "0" * 64}, allow_redirects=False) as r:
            assert r.status == 403
        async with ana.post(
            f"{url}/take", data={"csrf": csrf}, headers={"Origin": "https://evil.example"},
            allow_redirects=False,
        ) as response:  # fmt: skip
            assert response.status == 403
        assert db_rows(app, "select status from handoffs") == [("waiting",)]

        async with aiohttp.ClientSession(cookie_jar=ana.cookie_jar) as live:
            stream = await live.get(f"{url}/events", timeout=aiohttp.ClientTimeout(total=30))
            assert stream.headers["Content-Type"].startswith("text/event-stream")
            async with ana.post(f"{url}/take", data={"csrf": csrf}, allow_redirects=False) as r:
                assert r.status == 303
            async with ben.post(f"{url}/take", data={"csrf": csrf_of(html_ben)}) as r:
                assert r.status == 409 and "Already taken by Ana" in await r.text()
            await desk.user_sees("Ana has joined")
            seen = ""
            while "event: state" not in seen:
                seen += (await stream.content.readline()).decode()
            seen += (await stream.content.readline()).decode()  # its data line
            assert '"operator":"Ana"' in seen and '"mode":"human"' in seen
            stream.close()

        _, html = await page(ana, url)
        nonce = re.search(r'name="nonce" value="([0-9a-f]+)"', html)
        assert nonce is not None
        form = {"csrf": csrf, "text": "Found it, it arrives tomorrow.", "nonce": nonce.group(1)}
        for _ in range(2):  # the form posted twice: one message
            async with ana.post(f"{url}/reply", data=form, allow_redirects=False) as r:
                assert r.status == 303
        await desk.user_sees("arrives tomorrow")
        assert [t for t in desk.sent_to_user() if "arrives tomorrow" in t] == [
            "<b>Ana:</b> Found it, it arrives tomorrow."
        ]
        await desk.user_says("great, thanks")
        [parent] = desk.parents()
        await until(lambda: any("great, thanks" in t for t in desk.thread(parent.ts)))
        _, html = await page(ana, url)
        assert "great, thanks" in html and "Found it, it arrives tomorrow." in html

        form = {"csrf": csrf, "note": "parcel found; arrives tomorrow"}
        async with ana.post(f"{url}/release", data=form, allow_redirects=False) as r:
            assert r.status == 303
        await desk.user_sees("Ana handed the conversation back")
        audit = db_rows(app, "select actor, action from handoff_events order by id")
        assert audit == [
            ("user:4242", "requested"), ("admin:Ana", "took"),
            ("admin:Ben b", "take refused"), ("admin:Ana", "released"),
        ]  # fmt: skip
        await desk.user_says("when exactly?")
        await provider.wait_requests(1)
        said = "\n".join(str(m.content) for m in provider.requests[0].messages)
        assert "a person handled this" in said and "parcel found; arrives tomorrow" in said
    finally:
        await ana.close()
        await ben.close()


async def test_an_operator_takes_over_a_bot_conversation(desk: Desk) -> None:
    provider = ScriptedProvider([Reply("Hello from the bot.")])
    app = await desk.start(provider)
    await desk.user_says("hi")
    await desk.user_sees("Hello from the bot.")
    [(session_id,)] = db_rows(app, "select id from chat_sessions where channel = 'telegram'")
    ana = await signed_in(app, "Ana")
    try:
        _, html = await page(ana, f"{app.url}/admin/sessions/{session_id}")
        assert "Take over this conversation" in html
        form = {"csrf": csrf_of(html), "session_id": session_id}
        async with ana.post(f"{app.url}/admin/take-over", data=form, allow_redirects=False) as r:
            assert r.status == 303 and "/admin/handoffs/" in r.headers["Location"]
        await desk.user_sees("Ana has joined")
        await desk.user_says("is that a person?")
        await until(
            lambda: any("is that a person?" in t for p in desk.parents() for t in desk.thread(p.ts))
        )
        assert len(provider.requests) == 1  # the bot stays quiet while Ana has it
        [(mode,)] = db_rows(app, "select mode from conversation_states")
        assert mode == "human"
        _, listing = await page(ana, f"{app.url}/admin/handoffs?q=ana")
        assert "taken over by Ana" in listing
    finally:
        await ana.close()


async def test_conversations_are_searched_and_paged(desk: Desk) -> None:
    app = await desk.start(ScriptedProvider([Reply("one"), Reply("two")]))
    await desk.user_says("hi")
    await desk.user_sees("one")
    ana = await signed_in(app, "Ana")
    try:
        _, html = await page(ana, f"{app.url}/admin?q=telegram:4242")
        assert 'class="conversation' in html and "Page 1" in html
        _, html = await page(ana, f"{app.url}/admin?q=nobody-like-this")
        assert "No conversations match" in html
        _, html = await page(ana, f"{app.url}/admin?page=2")
        assert 'class="conversation' not in html and "← Newer" in html
        async with ana.get(f"{app.url}/admin/static/console.js") as response:
            assert response.status == 200 and "EventSource" in await response.text()
    finally:
        await ana.close()
