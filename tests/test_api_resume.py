"""A stream resumed with `Last-Event-ID: N` starts at exactly N + 1: nothing seen twice, no gap."""

from __future__ import annotations

import aiohttp

from agent.providers.scripted import Reply, ScriptedProvider
from tests.api_kit import ApiClient, StartApi, start_api_fixture  # noqa: F401

ANSWER = "It is noon."
QUESTION = {"text": "what time is it?", "client_message_id": "c1"}


async def _answered(
    start_api: StartApi, session: aiohttp.ClientSession
) -> tuple[ApiClient, str, int]:
    """A turn with a tool call, streamed whole: the API client, the session and N, the id of
    its `message.created`. The event at N + 1 is `tool.started`; neither is ever superseded in
    the hub's replay (an update or the completion may supersede an earlier update), so a resume
    after N must start at N + 1, and one off by one either way shows."""
    provider = ScriptedProvider(
        [Reply(calls=[("get_current_datetime", {"timezone": "UTC"})]), Reply(ANSWER)]
    )
    app = await start_api(provider)
    api = ApiClient(session, app)
    sid = await api.new_session()
    whole = await api.stream("POST", f"/sessions/{sid}/messages", QUESTION)
    assert whole.types()[-1] == "message.completed"
    (created, created_id), (started, started_id) = [(e.type, e.id) for e in whole.events[:2]]
    assert (created, started) == ("message.created", "tool.started"), whole.types()
    assert created_id is not None and started_id == created_id + 1
    return api, sid, created_id


async def test_a_resend_with_last_event_id_starts_right_after_it(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    api, sid, seen = await _answered(start_api, session)
    again = await api.stream(
        "POST", f"/sessions/{sid}/messages", QUESTION, headers={"Last-Event-ID": str(seen)}
    )
    assert again.ids()[0] == seen + 1, (seen, again.ids())
    assert again.ids() == sorted(again.ids())
    assert again.last("message.completed")["text"] == ANSWER


async def test_a_follower_with_last_event_id_starts_right_after_it(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    api, sid, seen = await _answered(start_api, session)
    follow = await api.stream(
        "GET", f"/sessions/{sid}/events", until=1, headers={"Last-Event-ID": str(seen)}
    )
    assert follow.ids() == [seen + 1]
