"""The real `anthropic` client against a local fake Messages API, through a web socket conversation."""

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import ClientSession

from agent.providers.classify import KEY_REFUSED
from bot.storage.rows import TurnUsage
from tests.conftest import Running, ask_once, connect, db_rows
from tests.fake_anthropic import FakeAnthropic
from tests.fake_llm import Call, Reply, llm_config


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


async def test_text_streams_into_the_placeholder(
    running: Running, session: ClientSession, fake: FakeAnthropic
) -> None:
    fake.add(Reply(text=["The answer ", "is forty-", "two."], delay_s=0.05, usage=(31, 9)))
    app = await running(llm=llm_config("anthropic", fake))
    completed, frames = await ask_once(session, app, "what is the answer?")
    assert completed["text"] == "The answer is forty-two."
    updates = [f["text"] for f in frames if f["type"] == "message.updated"]
    assert any(t.startswith("The answer") and t != completed["text"] for t in updates), updates
    [sent] = fake.requests
    assert sent.api_key == "test-key" and sent.headers["Authorization"] == "Bearer test-key"
    body = sent.body
    assert body["stream"] is True and body["model"] == "test-model"
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "what is the answer?"}]}
    ]
    assert "helpful assistant" in body["system"]
    assert "get_current_datetime" in [t["name"] for t in body["tools"]]
    assert db_rows(app, "select provider, model, input_tokens, output_tokens from usage") == [
        ("anthropic", "test-model", 31, 9)
    ]
    tokens = db_rows(app, "select role, tokens_in, tokens_out from messages order by id")
    assert tokens == [("user", None, None), ("assistant", 31, 9)]


async def test_a_tool_call_split_across_chunks(
    running: Running, session: ClientSession, fake: FakeAnthropic
) -> None:
    args = '{"timezone": "Asia/Tokyo"}'
    fake.add(
        Reply(text=["Let me check. "], calls=[Call("get_current_datetime", args, split=4)]),
        Reply(text=["It is evening in Tokyo."]),
    )
    app = await running(llm=llm_config("anthropic", fake))
    completed, _ = await ask_once(session, app, "time in Tokyo?")
    assert completed["text"] == "It is evening in Tokyo."
    second = fake.requests[1].body["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    text, use = second[1]["content"]
    assert text == {"type": "text", "text": "Let me check. "}
    assert use["type"] == "tool_use" and use["input"] == {"timezone": "Asia/Tokyo"}
    [result] = second[2]["content"]
    assert result["type"] == "tool_result" and result["tool_use_id"] == use["id"]
    assert not result["is_error"] and "Asia/Tokyo" in result["content"]
    assert db_rows(app, "select tool_name, arguments, ok from audit_logs") == [
        ("get_current_datetime", args, 1)
    ]
    [(turn_id,)] = db_rows(app, "select id from turns")
    totals = await app.store.turn_usage(turn_id)
    assert totals == TurnUsage(2, 24, 14)


async def test_two_parallel_tool_calls_answered_in_one_turn(
    running: Running, session: ClientSession, fake: FakeAnthropic
) -> None:
    fake.add(
        Reply(calls=[
            Call("get_current_datetime", '{"timezone": "Europe/Paris"}'),
            Call("get_current_datetime", '{"timezone": "America/New_York"}', split=3),
        ]),
        Reply(text=["Paris is six hours ahead."]),
    )  # fmt: skip
    app = await running(llm=llm_config("anthropic", fake))
    completed, _ = await ask_once(session, app, "Paris vs New York?")
    assert completed["text"] == "Paris is six hours ahead."
    assistant, results = fake.requests[1].body["messages"][1:]
    ids = [block["id"] for block in assistant["content"]]
    assert len(set(ids)) == 2
    assert [r["tool_use_id"] for r in results["content"]] == ids
    assert "Europe/Paris" in results["content"][0]["content"]
    assert "America/New_York" in results["content"][1]["content"]


async def test_malformed_tool_arguments_come_back_as_an_error_result(
    running: Running, session: ClientSession, fake: FakeAnthropic
) -> None:
    fake.add(
        Reply(calls=[Call("get_current_datetime", '{"timezone": "Asia/To')]),
        Reply(text=["Sorry, let me answer without the tool."]),
    )
    app = await running(llm=llm_config("anthropic", fake))
    completed, _ = await ask_once(session, app, "time?")
    assert completed["text"] == "Sorry, let me answer without the tool."
    assistant, results = fake.requests[1].body["messages"][1:]
    assert assistant["content"][0]["input"] == {}  # the API wants an object back
    [result] = results["content"]
    assert result["is_error"] is True and "invalid arguments" in result["content"]
    assert db_rows(app, "select arguments, ok from audit_logs") == [('{"timezone": "Asia/To', 0)]


async def test_history_goes_back_as_alternating_turns(
    running: Running, session: ClientSession, fake: FakeAnthropic
) -> None:
    fake.add(Reply(text=["one"]), Reply(text=["two"]))
    app = await running(llm=llm_config("anthropic", fake))
    client = await connect(session, app)
    await client.hello()
    await client.ask("first")
    await client.ask("second")
    roles = [(m["role"], m["content"][0]["text"]) for m in fake.requests[1].body["messages"]]
    assert roles == [("user", "first"), ("assistant", "one"), ("user", "second")]


async def test_a_wrong_key_says_so_in_the_chat_and_the_log(
    running: Running, session: ClientSession, fake: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    app = await running(llm=llm_config("anthropic", fake, api_key="sk-ant-wrong-key-123456"))
    completed, _ = await ask_once(session, app, "hi")
    assert completed["text"] == f"Sorry — {KEY_REFUSED}"
    assert len(fake.requests) == 1  # a refused key is not retried
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "set a valid ANTHROPIC_API_KEY" in logged
    assert "wrong-key" not in logged and not any(r.exc_info for r in caplog.records)
    [(status, error)] = db_rows(app, "select status, error from turns")
    assert status == "failed" and "API key was refused" in error
    assert "wrong-key" not in json.dumps(db_rows(app, "select * from turns"))


async def test_a_turn_counts_the_usage_of_its_specialists(
    running: Running, session: ClientSession, fake: FakeAnthropic
) -> None:
    PROMPT = "Find out what X is in the 2026 standard and return one sentence with the value and a source."
    dispatch = json.dumps(
        {"description": "look it up", "subagent_type": "specialist-research", "prompt": PROMPT}
    )

    def script(body: dict[str, Any]) -> Reply:
        if "research specialist" in body["system"]:
            return Reply(text=["X is 42."], usage=(100, 10))
        if body["messages"][-1]["content"][0]["type"] == "tool_result":
            return Reply(text=["They say X is 42."], usage=(50, 5))
        return Reply(calls=[Call("AgentTool", dispatch)], usage=(40, 4))

    fake.script = script
    app = await running(llm=llm_config("anthropic", fake))
    completed, _ = await ask_once(session, app, "what is X?")
    assert completed["text"] == "They say X is 42."
    [(turn_id, session_id)] = db_rows(app, "select id, session_id from turns")
    totals = await app.store.turn_usage(turn_id)
    assert totals == TurnUsage(3, 190, 19)
    child = db_rows(
        app,
        "select u.input_tokens from usage u join chat_sessions s on s.id = u.session_id"
        f" where s.parent_session_id = '{session_id}'",
    )
    assert child == [(100,)]  # recorded in the specialist's own session
