"""Malformed requests get a clear 4xx JSON error; history pages; the rate limit."""

from __future__ import annotations

import io
from typing import Any

import aiohttp
import pytest

from adapters.api import bodies
from adapters.api.errors import ApiError
from agent.providers.scripted import Reply, ScriptedProvider
from tests.api_kit import KEY_A, ApiClient, StartApi, start_api_fixture  # noqa: F401

AUTH = {"Authorization": f"Bearer {KEY_A}"}


@pytest.mark.parametrize(
    ("body", "content_type", "status", "code"),
    [
        (b"{not json", "application/json", 400, "bad_json"),
        (b"[1, 2]", "application/json", 400, "bad_json"),
        (b'{"text": "hi"}', "text/plain", 415, "unsupported_media_type"),
        (b"{}", "application/json", 400, "empty_text"),
        (b'{"text": "   "}', "application/json", 400, "empty_text"),
        (b'{"text": 5}', "application/json", 400, "bad_field"),
        (b'{"text": "' + b"x" * 101 + b'"}', "application/json", 400, "text_too_long"),
        (b'{"text": "hi", "client_message_id": ""}', "application/json", 400, "bad_field"),
        (b'{"text": "\\ud800"}', "application/json", 400, "bad_field"),
        (b'{"text": ' + b"[" * 990 + b"]" * 990 + b"}", "application/json", 400, "bad_json"),
        (b"[" * 100_000, "application/json", 400, "bad_json"),
        (b'{"text": "' + b"x" * 2_000_000 + b'"}', "application/json", 413, "body_too_large"),
    ],
)
async def test_a_bad_message_body_is_refused_with_its_reason(
    start_api: StartApi,
    session: aiohttp.ClientSession,
    body: bytes,
    content_type: str,
    status: int,
    code: str,
) -> None:
    app = await start_api(max_text_chars=100)
    sid = await ApiClient(session, app).new_session()
    headers = {**AUTH, "Content-Type": content_type}
    url = f"{app.url}/api/v1/sessions/{sid}/messages"
    async with session.post(url, data=io.BytesIO(body), headers=headers) as response:
        assert (response.status, response.content_type) == (status, "application/json")
        error = (await response.json())["error"]
    assert error["code"] == code and error["message"]


@pytest.mark.parametrize(("body", "status"), [(b"", 201), (b"\n", 400), (b"  ", 400)])
async def test_a_session_takes_no_body_but_a_body_of_blanks_is_not_json(
    start_api: StartApi, session: aiohttp.ClientSession, body: bytes, status: int
) -> None:
    """The body of `POST /sessions` is optional; one sent must be JSON (found by schemathesis)."""
    app = await start_api()
    headers = {**AUTH, "Content-Type": "application/json"}
    async with session.post(f"{app.url}/api/v1/sessions", data=body, headers=headers) as response:
        assert (response.status, response.content_type) == (status, "application/json")
        if status == 400:
            assert (await response.json())["error"]["code"] == "bad_json"


def test_a_field_nested_too_deep_to_encode_is_a_bad_field() -> None:
    nested: list[Any] = []
    for _ in range(10_000):  # deeper than any JSON encoder goes; built without a parser
        nested = [nested]
    with pytest.raises(ApiError) as refused:
        bodies.user_text({"text": nested}, 100)
    assert (refused.value.status, refused.value.code) == (400, "bad_field")


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/api/v1/nowhere", 404, "not_found"),
        ("DELETE", "/api/v1/sessions", 405, "method_not_allowed"),
        ("GET", "/api/v1/sessions/not-an-id", 404, "not_found"),
        ("GET", "/api/v1/sessions/{sid}/messages?limit=0", 400, "bad_field"),
        ("GET", "/api/v1/sessions/{sid}/messages?limit=101", 400, "bad_field"),
        ("GET", "/api/v1/sessions/{sid}/messages?before=x", 400, "bad_field"),
        ("GET", "/api/v1/sessions/{sid}/messages?page=2", 400, "bad_field"),
        ("GET", "/api/v1/sessions/{sid}/messages?before=1&before=2", 400, "bad_field"),
        ("POST", "/api/v1/sessions/{sid}/actions", 400, "bad_field"),  # no action_id
    ],
)
async def test_bad_paths_and_queries_are_refused_as_json(
    start_api: StartApi,
    session: aiohttp.ClientSession,
    method: str,
    path: str,
    status: int,
    code: str,
) -> None:
    app = await start_api()
    sid = await ApiClient(session, app).new_session()
    url = app.url + path.format(sid=sid)
    async with session.request(method, url, json={}, headers=AUTH) as response:
        assert response.status == status
        assert (await response.json())["error"]["code"] == code


async def test_a_bad_last_event_id_is_refused(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    app = await start_api()
    api = ApiClient(session, app)
    sid = await api.new_session()
    for value in ("-1", "abc", "1.5", str(2**60)):
        refused = await api.stream(
            "GET", f"/sessions/{sid}/events", headers={"Last-Event-ID": value}
        )
        assert refused.status == 400 and refused.events[0].data["error"]["code"] == "bad_field"


async def test_history_pages_backwards_and_forwards(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply(f"answer {n}") for n in range(4)])
    app = await start_api(provider)
    api = ApiClient(session, app)
    sid = await api.new_session()
    for n in range(4):
        await api.ask(sid, f"question {n}", client_message_id=f"q{n}")
    everything = [f"{kind} {n}" for n in range(4) for kind in ("question", "answer")]

    async def page(query: str) -> dict[str, Any]:
        status, body = await api.call("GET", f"/sessions/{sid}/messages?{query}")
        assert status == 200
        return dict(body)

    newest = await page("limit=3")
    assert [m["text"] for m in newest["messages"]] == everything[-3:] and newest["has_more"]
    seen = newest["messages"]
    while True:  # older pages, by the oldest position seen
        older = await page(f"limit=3&before={seen[0]['position']}")
        seen = older["messages"] + seen
        if not older["has_more"]:
            break
    assert [m["text"] for m in seen] == everything
    first = await page("limit=5&after=0")
    assert [m["text"] for m in first["messages"]] == everything[:5] and first["has_more"]
    rest = await page(f"limit=5&after={first['messages'][-1]['position']}")
    assert [m["text"] for m in rest["messages"]] == everything[5:] and not rest["has_more"]
    # both: the messages between, paged forward from `after` (the document allows it)
    positions = [m["position"] for m in seen]
    window = await page(f"limit=2&after={positions[1]}&before={positions[6]}")
    assert [m["text"] for m in window["messages"]] == everything[2:4] and window["has_more"]
    window = await page(f"limit=9&after={positions[1]}&before={positions[6]}")
    assert [m["text"] for m in window["messages"]] == everything[2:6]
    assert not window["has_more"]


async def test_too_many_messages_get_429_with_retry_after(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider(lambda request: Reply("ok"))
    app = await start_api(provider, rate_limit_per_minute=2)
    api = ApiClient(session, app)
    sid = await api.new_session()
    assert (await api.ask(sid, "one")).status == 200
    assert (await api.ask(sid, "two")).status == 200
    refused = await api.ask(sid, "three", client_message_id="c3")
    assert refused.status == 429 and int(refused.headers["Retry-After"]) > 0
    assert refused.events[0].data["error"]["code"] == "rate_limited"
    status, page = await api.call("GET", f"/sessions/{sid}/messages")
    assert "three" not in [m["text"] for m in page["messages"]]
