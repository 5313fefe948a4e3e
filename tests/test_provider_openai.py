"""The real `openai` client against a local fake Chat Completions API, through a web socket
conversation: OpenAI itself and the quirks of compatible servers."""

import logging
from collections.abc import AsyncIterator

import pytest
from aiohttp import ClientSession

from agent.providers.classify import KEY_REFUSED, OUT_OF_CREDIT
from tests.conftest import Running, ask_once, db_rows
from tests.fake_llm import Call, Reply, fail, llm_config
from tests.fake_openai import FakeOpenAI
from tests.sdk_paths import sdk_path  # noqa: F401 (autouse: each test on both SDK paths)


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


async def test_text_streams_into_the_placeholder(
    running: Running, session: ClientSession, fake: FakeOpenAI
) -> None:
    fake.add(Reply(text=["Forty", "-two, ", "of course."], delay_s=0.05, usage=(40, 6)))
    app = await running(llm=llm_config("openai", fake))
    completed, frames = await ask_once(session, app, "the answer?")
    assert completed["text"] == "Forty-two, of course."
    updates = [f["text"] for f in frames if f["type"] == "message.updated"]
    assert any(t.startswith("Forty") and t != completed["text"] for t in updates), updates
    [sent] = fake.requests
    assert sent.headers["Authorization"] == "Bearer test-key"
    body = sent.body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert (
        body["messages"][0]["role"] == "system"
        and "helpful assistant" in body["messages"][0]["content"]
    )
    assert body["messages"][1:] == [{"role": "user", "content": "the answer?"}]
    assert body["max_tokens"] > 0  # a compatible server: the classic name
    assert "get_current_datetime" in [t["function"]["name"] for t in body["tools"]]
    assert db_rows(app, "select provider, model, input_tokens, output_tokens from usage") == [
        ("openai", "test-model", 40, 6)
    ]


async def test_tool_calls_split_across_chunks_two_in_parallel(
    running: Running, session: ClientSession, fake: FakeOpenAI
) -> None:
    fake.add(
        Reply(text=["Checking both. "], calls=[
            Call("get_current_datetime", '{"timezone": "Europe/Paris"}', split=5),
            Call("get_current_datetime", '{"timezone": "Asia/Tokyo"}', split=3),
        ]),
        Reply(text=["Tokyo is ahead."]),
    )  # fmt: skip
    app = await running(llm=llm_config("openai", fake))
    completed, _ = await ask_once(session, app, "Paris vs Tokyo?")
    assert completed["text"] == "Tokyo is ahead."
    assistant, *results = fake.requests[1].body["messages"][2:]
    assert assistant["role"] == "assistant" and assistant["content"] == "Checking both. "
    calls = assistant["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == [
        '{"timezone": "Europe/Paris"}',
        '{"timezone": "Asia/Tokyo"}',
    ]
    assert [r["role"] for r in results] == ["tool", "tool"]
    assert [r["tool_call_id"] for r in results] == [c["id"] for c in calls]
    assert "Europe/Paris" in results[0]["content"] and "Asia/Tokyo" in results[1]["content"]


async def test_compatible_server_quirks(running: Running, session: ClientSession) -> None:
    """Arguments in one chunk, no ids, no usage chunk, text and a tool call in one message."""
    async with FakeOpenAI(compat=True, api_key="ollama") as fake:
        fake.add(
            Reply(
                text=["One moment. "],
                calls=[Call("get_current_datetime", '{"timezone": "UTC"}', split=0, id="")],
            ),
            Reply(text=["Done."]),
        )
        app = await running(llm=llm_config("openai", fake))
        completed, _ = await ask_once(session, app, "utc time?")
        assert completed["text"] == "Done."
        assistant, result = fake.requests[1].body["messages"][2:]
        [call] = assistant["tool_calls"]
        assert call["id"] and result["tool_call_id"] == call["id"]
        assert '"timezone": "UTC"' in result["content"]
        assert db_rows(app, "select count(*) from usage") == [
            (0,)
        ]  # nothing reported, nothing invented


async def test_malformed_tool_arguments_come_back_as_an_error_result(
    running: Running, session: ClientSession, fake: FakeOpenAI
) -> None:
    fake.add(
        Reply(calls=[Call("get_current_datetime", '{"timezone": ')]),
        Reply(text=["Let me try that differently."]),
    )
    app = await running(llm=llm_config("openai", fake))
    completed, _ = await ask_once(session, app, "time?")
    assert completed["text"] == "Let me try that differently."
    assistant, result = fake.requests[1].body["messages"][2:]
    assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"  # servers may parse history
    assert result["content"].startswith("Error: ") and "invalid arguments" in result["content"]


async def test_a_wrong_key_says_so_in_the_chat_and_the_log(
    running: Running, session: ClientSession, fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    app = await running(llm=llm_config("openai", fake, api_key="sk-proj-wrong-key-0000"))
    completed, _ = await ask_once(session, app, "hi")
    assert completed["text"] == f"Sorry — {KEY_REFUSED}"
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "set a valid OPENAI_API_KEY" in logged and "wrong-key" not in logged
    assert len(fake.requests) == 1


async def test_insufficient_quota_is_not_retried(
    running: Running, session: ClientSession, fake: FakeOpenAI
) -> None:
    fake.add(
        fail(429, "insufficient_quota", "You exceeded your current quota, please check your plan")
    )
    app = await running(llm=llm_config("openai", fake, max_retries=3))
    completed, _ = await ask_once(session, app, "hi")
    assert completed["text"] == f"Sorry — {OUT_OF_CREDIT}"
    assert len(fake.requests) == 1


PARIS, UTC = '{"timezone": "Europe/Paris"}', '{"timezone": "UTC"}'


@pytest.mark.parametrize("split", [0, 5])
async def test_calls_without_index_or_id_stay_apart(
    running: Running, session: ClientSession, fake: FakeOpenAI, split: int
) -> None:
    """Two calls in a row from a server that numbers nothing: the second name starts a call."""
    fake.add(
        Reply(calls=[
            Call("get_current_datetime", PARIS, split=split, id="", indexed=False),
            Call("get_current_datetime", UTC, split=split, id="", indexed=False),
        ]),
        Reply(text=["Both."]),
    )  # fmt: skip
    app = await running(llm=llm_config("openai", fake))
    completed, _ = await ask_once(session, app, "Paris and UTC?")
    assert completed["text"] == "Both."
    assistant, *results = fake.requests[1].body["messages"][2:]
    calls = assistant["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == [PARIS, UTC]
    assert len({c["id"] for c in calls}) == 2
    assert [r["tool_call_id"] for r in results] == [c["id"] for c in calls]
    assert "Europe/Paris" in results[0]["content"] and "UTC" in results[1]["content"]


@pytest.mark.parametrize("quirk", ["name_every_delta", "resent"])
async def test_a_name_or_arguments_sent_again_are_one_call(
    running: Running, session: ClientSession, fake: FakeOpenAI, quirk: str
) -> None:
    call = Call("get_current_datetime", PARIS, split=4, id="", indexed=False, **{quirk: True})
    fake.add(Reply(calls=[call]), Reply(text=["Paris."]))
    app = await running(llm=llm_config("openai", fake))
    completed, _ = await ask_once(session, app, "Paris?")
    assert completed["text"] == "Paris."
    [sent] = fake.requests[1].body["messages"][2]["tool_calls"]
    assert sent["function"]["arguments"] == PARIS
