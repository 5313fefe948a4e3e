"""Open streams are capped per API key and in all: one past a cap is refused with a clear body
before anything is kept, health endpoints answer all the while, and a slot comes back when its
stream ends. A running app, real sockets, the API as a client speaks it."""

from __future__ import annotations

import asyncio

import aiohttp

from tests.api_kit import KEY_A, KEY_B, ApiClient, StartApi, start_api_fixture

__all__ = ["start_api_fixture"]


async def _follow(client: ApiClient, session_id: str) -> aiohttp.ClientResponse:
    url = f"{client.base}/sessions/{session_id}/events"
    return await client.http.get(url, headers=client.headers())


async def test_streams_past_the_caps_are_refused_and_health_still_answers(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    app = await start_api(max_streams_per_key=3, max_streams=5, keepalive_s=0.1)
    a, b = ApiClient(session, app, KEY_A), ApiClient(session, app, KEY_B)
    sa, sb = await a.new_session(), await b.new_session()
    held = [await _follow(a, sa) for _ in range(3)]
    assert [r.status for r in held] == [200, 200, 200]

    refused = await _follow(a, sa)
    assert refused.status == 429 and refused.headers["Retry-After"] == "5"
    assert (await refused.json())["error"]["code"] == "too_many_streams"
    status, body = await a.call("POST", f"/sessions/{sa}/messages", {"text": "hello"})
    assert status == 429 and "max_streams_per_key" in body["error"]["message"]
    status, page = await a.call("GET", f"/sessions/{sa}/messages")
    assert status == 200 and page["messages"] == []  # refused before it was kept

    held += [await _follow(b, sb) for _ in range(2)]
    assert [r.status for r in held[3:]] == [200, 200]
    busy = await _follow(b, sb)  # key b has room; the server has not
    assert busy.status == 503 and busy.headers["Retry-After"] == "5"
    assert (await busy.json())["error"]["code"] == "server_busy"

    for probe in ("/livez", "/healthz", "/readyz"):
        async with session.get(app.url + probe) as response:
            assert response.status == 200, probe

    held.pop(0).close()  # the client goes; the next keepalive write finds it gone
    for _ in range(200):  # a hang guard, not a pace: each try is an answer
        again = await _follow(a, sa)
        if again.status == 200:
            break
        again.close()
        await asyncio.sleep(0.05)
    assert again.status == 200
    for response in [*held, again]:
        response.close()
