"""Who may reach `/admin`: no forwarding header makes a request local, guesses from many
addresses are held off in all, and a short token is refused at start. A running app, real
sockets, client addresses chosen by binding the client's side to other loopback addresses."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest
from aiohttp import ClientSession

from bot.ops.admin.throttle import GLOBAL_LIMIT, LIMIT, SignInThrottle
from bot.runtime.config import ConfigError
from tests.admin_kit import TOKEN
from tests.conftest import Running, make_config

BEARER = {"Authorization": f"Bearer {TOKEN}"}


def from_address(address: str) -> ClientSession:
    """A client whose connections come from `address` (any 127.x.y.z is this host on Linux)."""
    return ClientSession(connector=aiohttp.TCPConnector(local_addr=(address, 0)))


@pytest.mark.parametrize(
    "header", ["True-Client-IP", "CF-Connecting-IP", "X-Client-IP", "Fastly-Client-IP"]
)
async def test_a_cdn_client_header_alone_is_not_taken_as_local(
    running: Running, session: ClientSession, header: str
) -> None:
    app = await running(admin={"token": TOKEN})
    relayed = {**BEARER, header: "203.0.113.9"}
    async with session.get(f"{app.url}/admin", headers=relayed) as response:
        assert response.status == 403
    async with session.get(f"{app.url}/admin", headers=BEARER) as response:
        assert response.status == 200


async def test_a_trusted_proxy_names_the_client(running: Running, session: ClientSession) -> None:
    app = await running(admin={"token": TOKEN, "trusted_proxies": ["127.0.0.1"]})
    url = f"{app.url}/admin"
    cases = {
        "127.0.0.1": 200,  # a browser on this host, through the proxy on this host
        "203.0.113.9": 403,  # a client from afar: still loopback only
        "127.0.0.5, 203.0.113.9": 403,  # what the client wrote itself comes first: ignored
        "not-an-address": 403,
    }
    for hops, status in cases.items():
        headers = {**BEARER, "X-Forwarded-For": hops, "CF-Connecting-IP": "127.0.0.1"}
        async with session.get(url, headers=headers) as response:
            assert response.status == status, hops
    async with from_address("127.0.0.2") as stranger:  # not a trusted proxy: its header is not
        headers = {**BEARER, "X-Forwarded-For": "127.0.0.1"}
        async with stranger.get(url, headers=headers) as response:
            assert response.status == 403


async def test_guesses_from_rotating_addresses_are_held_off_in_all(
    running: Running, session: ClientSession
) -> None:
    app = await running(admin={"token": TOKEN})
    url = f"{app.url}/admin"
    async with session.get(url, headers=BEARER) as response:  # the admin, from 127.0.0.1
        assert response.status == 200
    guessed = 0
    for host in range(2, 2 + GLOBAL_LIMIT // LIMIT):
        async with from_address(f"127.0.0.{host}") as guesser:
            for _ in range(LIMIT):
                async with guesser.post(f"{url}/login", data={"token": "guess"}) as response:
                    assert response.status == 401
                    guessed += 1
    assert guessed == GLOBAL_LIMIT
    async with from_address("127.0.0.200") as fresh:  # an address never seen before
        for attempt in (
            fresh.get(url, headers=BEARER),
            fresh.post(f"{url}/login", data={"token": TOKEN}, allow_redirects=False),
        ):
            async with attempt as response:  # the right token too: the answer must not tell
                assert response.status == 429
                assert int(response.headers["Retry-After"]) > 0
    async with session.get(url, headers=BEARER) as response:  # proved it before: let in
        assert response.status == 200


def test_the_lock_in_all_ends_a_window_after_the_guessing_stops() -> None:
    now = [1000.0]
    throttle = SignInThrottle(limit=3, window_s=60, clock=lambda: now[0], global_limit=6)
    throttle.succeeded("192.0.2.100")
    for host in range(6):
        throttle.failed(f"192.0.2.{host}")
        now[0] += 1
    assert throttle.retry_after("192.0.2.50") == 54  # the first failure leaves at 1060
    assert throttle.retry_after("192.0.2.100") is None  # proved the token: its own limit only
    for _ in range(100):  # held-off requests are refused before they count
        assert throttle.retry_after("192.0.2.51") is not None
    now[0] += 54
    assert throttle.retry_after("192.0.2.50") is None


@pytest.mark.parametrize("token", ["q7w8e9", "0123456789abcde"])
def test_a_short_admin_token_refuses_to_start(tmp_path: Path, token: str) -> None:
    with pytest.raises(ConfigError) as refused:
        make_config(tmp_path, admin={"token": token})
    message = str(refused.value)
    assert "admin.token" in message and "16 characters" in message
    assert token not in message  # a secret: never repeated
