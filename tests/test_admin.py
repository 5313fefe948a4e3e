"""The admin view: off by default, refused without the token or from afar, escaped, and its
session tree the same as `bot sessions show`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import ClientSession, CookieJar, web

from bot.ops.admin import AdminSources, AdminView, Handler
from bot.ops.admin.throttle import LIMIT, WINDOW_S, SignInThrottle
from bot.reports.sessions_view import show_session
from tests.admin_kit import SCRIPT, TOKEN, Scene, admin_scene, tree_in_html, tree_in_text
from tests.conftest import Running

BEARER = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
async def scene(running: Running, session: ClientSession, tmp_path: Path) -> Scene:
    return await admin_scene(running, session, tmp_path)


async def test_the_admin_view_is_off_without_a_token(
    running: Running, session: ClientSession
) -> None:
    app = await running()
    async with session.get(f"{app.url}/admin", headers=BEARER) as response:
        assert response.status == 404
    async with session.get(f"{app.url}/admin/login") as response:
        assert response.status == 404


async def test_requests_without_the_right_token_are_refused(
    scene: Scene, session: ClientSession
) -> None:
    url = f"{scene.app.url}/admin"
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
        async with session.get(url, headers=headers) as response:
            assert response.status == 401, headers
            assert response.headers["WWW-Authenticate"] == "Bearer"
            assert "Armstrong" not in await response.text()
    page = f"{url}/sessions/{scene.root_session}"
    for cookie in ("wrong", TOKEN):  # the cookie is not the token itself
        async with session.get(page, cookies={"bot_admin": cookie}) as response:
            assert response.status == 401
    async with session.get(page, headers={"Accept": "text/html"}, allow_redirects=False) as r:
        assert r.status == 303 and r.headers["Location"] == "/admin/login"  # a browser: sign in


async def test_the_login_form_sets_a_cookie_only_for_the_right_token(scene: Scene) -> None:
    async with ClientSession(cookie_jar=CookieJar(unsafe=True)) as browser:  # an IP address host
        await _log_in(scene, browser)


async def _log_in(scene: Scene, session: ClientSession) -> None:
    url = f"{scene.app.url}/admin/login"
    async with session.post(url, data={"token": "nope"}, allow_redirects=False) as response:
        assert response.status == 401 and "bot_admin" not in response.cookies
    async with session.post(url, data={"token": TOKEN}, allow_redirects=False) as response:
        assert response.status == 303 and response.headers["Location"] == "/admin"
        cookie = response.cookies["bot_admin"]
        assert cookie["httponly"] and cookie["samesite"] == "Strict" and cookie["path"] == "/admin"
        assert TOKEN not in cookie.value  # it proves the token without holding it
    async with session.get(f"{scene.app.url}/admin") as response:  # the session keeps the cookie
        assert response.status == 200 and scene.root_session in await response.text()


RemoteApp = Callable[[str, bool], Awaitable[str]]


@pytest.fixture
async def from_afar(scene: Scene) -> AsyncIterator[RemoteApp]:
    """`url = await serve(remote, allow_remote)`: the admin view on a server that sees every
    request as coming from `remote` (as a reverse proxy's rewrite would make it)."""
    runners: list[web.AppRunner] = []

    async def serve(remote: str, allow_remote: bool) -> str:
        @web.middleware
        async def pretend(request: web.Request, handler: Handler) -> web.StreamResponse:
            return await handler(request.clone(remote=remote))

        app = web.Application(middlewares=[pretend])
        sources = AdminSources(
            scene.app.store,
            scene.app.personas,
            scene.app.channel_states,
            lambda: sorted(scene.app.channels),
            {},
        )
        config = scene.app.config.admin.model_copy(update={"allow_remote": allow_remote})
        AdminView(config, sources).install(app)
        runner = web.AppRunner(app)
        await runner.setup()
        runners.append(runner)
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        return f"http://127.0.0.1:{runner.addresses[0][1]}/admin"

    yield serve
    for runner in runners:
        await runner.cleanup()


async def test_non_loopback_addresses_are_refused_unless_configured(
    from_afar: RemoteApp, session: ClientSession
) -> None:
    for remote in ("192.0.2.7", "2001:db8::1", "::ffff:192.0.2.7"):
        url = await from_afar(remote, False)
        async with session.get(url, headers=BEARER) as response:
            assert response.status == 403, remote
        async with session.post(f"{url}/login", data={"token": TOKEN}) as response:
            assert response.status == 403, remote
    for remote in ("127.0.0.1", "::1", "::ffff:127.0.0.1"):
        async with session.get(await from_afar(remote, False), headers=BEARER) as response:
            assert response.status == 200, remote
    async with session.get(await from_afar("192.0.2.7", True), headers=BEARER) as response:
        assert response.status == 200


async def test_signed_in_from_afar_the_cookie_is_for_tls_only(
    from_afar: RemoteApp, session: ClientSession
) -> None:
    url = await from_afar("192.0.2.7", True)  # behind the operator's TLS proxy
    async with session.post(f"{url}/login", data={"token": TOKEN}, allow_redirects=False) as r:
        assert r.status == 303 and r.cookies["bot_admin"]["secure"]


async def test_a_request_relayed_by_a_proxy_on_this_host_is_not_taken_as_local(
    scene: Scene, session: ClientSession
) -> None:
    # nginx on the same host connects from 127.0.0.1 whoever the client is; it says so in these
    url = f"{scene.app.url}/admin"
    for header in ("X-Forwarded-For", "Forwarded", "X-Real-IP"):
        relayed = {**BEARER, header: "203.0.113.9"}
        async with session.get(url, headers=relayed) as response:
            assert response.status == 403, header
        async with session.post(f"{url}/login", data={"token": TOKEN}, headers=relayed) as r:
            assert r.status == 403, header
    async with session.get(url, headers=BEARER) as response:
        assert response.status == 200


async def test_the_index_lists_conversations_personas_channels_and_usage(
    scene: Scene, session: ClientSession
) -> None:
    async with session.get(f"{scene.app.url}/admin", headers=BEARER) as response:
        assert response.status == 200
        policy = response.headers["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy  # the console's
        html = await response.text()
    assert f'data-session="{scene.root_session}"' in html
    assert 'class="conversation failed"' in html  # it has a failed turn
    assert "specialist-a" in html and "broken.md:2" in html  # a persona file's error, file:line
    assert "websocket" in html
    assert "scripted" in html  # the model of the usage rows
    async with session.get(
        f"{scene.app.url}/admin", params={"channel": "telegram"}, headers=BEARER
    ) as response:
        assert scene.root_session not in await response.text()
    async with session.get(
        f"{scene.app.url}/admin", params={"user": "v:visitor-0001"}, headers=BEARER
    ) as response:
        assert scene.root_session in await response.text()


async def test_the_session_tree_matches_bot_sessions_show(
    scene: Scene, session: ClientSession
) -> None:
    url = f"{scene.app.url}/admin/sessions/{scene.root_session[:10]}"
    async with session.get(url, headers=BEARER) as response:
        assert response.status == 200
        html = await response.text()
    text = await show_session(scene.app.store, scene.root_session)
    expected = tree_in_text(text)
    assert expected == [
        ("session", scene.root_session, 0),
        ("call", "AgentTool", 0),
        ("session", scene.worker_session, 1),  # nested under the call that started it
        ("call", "lookup", 1),
    ]
    assert tree_in_html(html) == expected
    assert f'data-turn="{scene.failed_turn}"' in html
    assert 'class="turn failed"' in html and "no scripted reply left" in html


async def test_message_text_is_shown_escaped_never_as_html(
    scene: Scene, session: ClientSession
) -> None:
    url = f"{scene.app.url}/admin/sessions/{scene.root_session}"
    async with session.get(url, headers=BEARER) as response:
        html = await response.text()
    assert SCRIPT not in html and "<img" not in html
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    async with session.get(f"{scene.app.url}/admin/sessions/nope", headers=BEARER) as response:
        assert response.status == 404


async def test_an_address_that_guesses_wrong_tokens_is_held_off(
    scene: Scene, session: ClientSession
) -> None:
    url = f"{scene.app.url}/admin"
    for _ in range(LIMIT - 1):
        async with session.post(f"{url}/login", data={"token": "guess"}) as response:
            assert response.status == 401
    async with session.get(url, headers={"Authorization": "Bearer guess"}) as response:
        assert response.status == 401  # wrong bearer tokens count as guesses too
    for attempt in (
        session.post(f"{url}/login", data={"token": TOKEN}, allow_redirects=False),
        session.get(url, headers=BEARER),
    ):
        async with attempt as response:  # the right token too: the answer must not tell
            assert response.status == 429
            assert 0 < int(response.headers["Retry-After"]) <= WINDOW_S


def test_the_throttle_forgets_failures_after_its_window() -> None:
    now = [1000.0]
    throttle = SignInThrottle(limit=3, window_s=60, clock=lambda: now[0])
    for _ in range(3):
        assert throttle.retry_after("192.0.2.1") is None
        throttle.failed("192.0.2.1")
        now[0] += 10
    assert throttle.retry_after("192.0.2.1") == 30  # the first failure leaves the window at 1060
    assert throttle.retry_after("192.0.2.2") is None  # another address is not held off
    now[0] += 30
    assert throttle.retry_after("192.0.2.1") is None


async def test_a_browser_signed_in_before_is_not_held_off(scene: Scene) -> None:
    async with ClientSession(cookie_jar=CookieJar(unsafe=True)) as browser:
        await _log_in(scene, browser)
        async with ClientSession() as guesser:  # the same address: loopback
            for _ in range(LIMIT):
                async with guesser.post(f"{scene.app.url}/admin/login", data={"token": "x"}):
                    pass
        async with browser.get(f"{scene.app.url}/admin") as response:
            assert response.status == 200
