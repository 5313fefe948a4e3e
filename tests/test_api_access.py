"""Who may use the sessions API, and what a refusal looks like: keys, scoping, bad requests."""

from __future__ import annotations

import aiohttp
import pytest

from adapters.api.keys import KeyRing, hash_key
from agent.providers.scripted import Reply, ScriptedProvider
from tests.api_kit import KEY_A, KEY_B, ApiClient, StartApi, start_api_fixture  # noqa: F401
from tests.conftest import db_rows


def test_a_key_is_found_by_its_hash_and_nothing_else() -> None:
    ring = KeyRing([("a", hash_key(KEY_A)), ("b", hash_key(KEY_B))])
    assert ring.owner(f"Bearer {KEY_A}") == "a"
    assert ring.owner(f"bearer  {KEY_B} ") == "b"
    assert ring.owner(f"Bearer {KEY_A[:-1]}") is None
    assert ring.owner(hash_key(KEY_A)) is None  # the stored hash is not a key
    assert ring.owner(f"Bearer {hash_key(KEY_A)}") is None
    assert ring.owner(f"Basic {KEY_A}") is None
    assert ring.owner("Bearer ") is None and ring.owner(None) is None


@pytest.mark.parametrize(
    "authorization", [None, "Bearer nope", f"Basic {KEY_A}", KEY_A, f"Bearer {hash_key(KEY_A)}"]
)
async def test_requests_without_a_valid_key_are_refused_with_401(
    start_api: StartApi, session: aiohttp.ClientSession, authorization: str | None
) -> None:
    app = await start_api()
    headers = {} if authorization is None else {"Authorization": authorization}
    async with session.post(f"{app.url}/api/v1/sessions", headers=headers) as response:
        assert response.status == 401
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
        body = await response.json()
    assert body["error"]["code"] == "unauthorized"
    assert KEY_A not in str(body)


async def test_one_key_never_sees_another_keys_session(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("for a only")])
    app = await start_api(provider)
    owner, other = ApiClient(session, app, KEY_A), ApiClient(session, app, KEY_B)
    sid = await owner.new_session()
    await owner.ask(sid, "secret question")
    missing = "s_" + "0" * 32
    for path in (f"/sessions/{sid}", f"/sessions/{sid}/messages"):
        assert await other.call("GET", path) == await other.call("GET", path.replace(sid, missing))
        status, body = await other.call("GET", path)
        assert status == 404 and body["error"]["code"] == "not_found"
    for path, body in (
        ("/messages", {"text": "let me in"}),
        ("/actions", {"action_id": "confirm"}),
        ("/stop", None),
    ):
        refused = await other.stream("POST", f"/sessions/{sid}{path}", body)
        assert refused.status == 404, path
    follow = await other.stream("GET", f"/sessions/{sid}/events")
    assert follow.status == 404
    assert len(provider.requests) == 1  # nothing of the other key's reached the model
    status, page = await owner.call("GET", f"/sessions/{sid}/messages")
    assert [m["text"] for m in page["messages"]] == ["secret question", "for a only"]


async def test_the_same_user_id_under_two_keys_is_two_users(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("hi a"), Reply("hi b")])
    app = await start_api(provider)
    for key in (KEY_A, KEY_B):
        api = ApiClient(session, app, key)
        await api.ask(await api.new_session(user_id="42"), "hello")
    users = db_rows(app, "select user_id from chat_sessions where channel = 'api'")
    assert sorted(users) == [("a:42",), ("b:42",)]
    assert [r.messages[-1].content for r in provider.requests] == ["hello", "hello"]
    assert len(provider.requests[1].messages) == 1  # b's user 42 does not see a's history


async def test_every_endpoint_but_the_document_needs_a_key(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    app = await start_api()
    sid = await ApiClient(session, app).new_session()
    base = f"{app.url}/api/v1"
    for method, path in [
        ("POST", "/sessions"),
        ("GET", f"/sessions/{sid}"),
        ("GET", f"/sessions/{sid}/messages"),
        ("POST", f"/sessions/{sid}/messages"),
        ("GET", f"/sessions/{sid}/events"),
        ("POST", f"/sessions/{sid}/stop"),
        ("POST", f"/sessions/{sid}/actions"),
    ]:
        async with session.request(method, base + path, json={"text": "hi"}) as response:
            assert response.status == 401, (method, path)
    async with session.get(f"{base}/openapi.json") as response:
        assert response.status == 200
