"""What the sessions API's OpenAPI document promises beyond its routes: every event a stream
carries validates against `StreamEvent`, `/events` is said to go on past an answer, and the
405 and 500 answers are declared."""

from __future__ import annotations

from typing import Any

import aiohttp
import jsonschema

from adapters.api.openapi import document
from agent.providers.scripted import Reply, ScriptedProvider
from tests.api_kit import ApiClient, StartApi, start_api_fixture  # noqa: F401


def event_validator() -> jsonschema.Draft202012Validator:
    doc = document()
    schema: dict[str, Any] = {"$ref": "#/components/schemas/StreamEvent", **doc}
    return jsonschema.Draft202012Validator(schema)


def test_every_operation_declares_405_and_500_and_events_do_not_end_at_an_answer() -> None:
    doc = document()
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            if method != "parameters":
                assert {"405", "500"} <= set(operation["responses"]), (method, path)
    assert {"E405", "E500"} <= set(doc["components"]["responses"])
    events = doc["paths"]["/sessions/{session_id}/events"]["get"]["responses"]["200"]
    assert "does **not** end at a message.completed" in events["description"]
    body = events["content"]["text/event-stream"]
    assert body["x-event-data"] == {"$ref": "#/components/schemas/StreamEvent"}
    validator = event_validator()
    assert not validator.is_valid({"type": "message.completed", "text": "no id, no seq"})
    assert not validator.is_valid({"type": "agent.started"})


async def test_every_event_of_a_real_stream_is_a_stream_event(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider(
        [
            Reply(calls=[("get_current_datetime", {"timezone": "Asia/Tokyo"})]),
            Reply("It is **noon** in Tokyo.", chunks=4, delay_s=0.02),
        ]
    )
    app = await start_api(provider)
    api = ApiClient(session, app)
    sid = await api.new_session()
    stream = await api.ask(sid, "time in Tokyo?", client_message_id="c1")
    assert {"message.created", "tool.started", "message.completed"} <= set(stream.types())
    validator = event_validator()
    for event in stream.events:
        errors = [error.message for error in validator.iter_errors(event.data)]
        assert not errors, (event.type, event.data, errors)
        assert event.data["type"] == event.type
