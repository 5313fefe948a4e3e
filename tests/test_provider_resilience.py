"""Retries, deadlines and fallback with the real SDK clients against fake servers, through a web
socket conversation: 429 with retry-after, 500, overloaded mid-stream, a stalled stream, fallback."""

import socket
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import ClientSession

from agent.providers.base import ProviderUnavailable
from agent.providers.classify import OUT_OF_CREDIT
from tests.conftest import Running, ask_once, db_rows
from tests.fake_anthropic import FakeAnthropic
from tests.fake_llm import FakeLLM, Reply, by_backup, fail, llm_config
from tests.fake_openai import FakeOpenAI
from tests.sdk_paths import sdk_path  # noqa: F401 (autouse: each test on both SDK paths)

VENDORS: dict[str, type[FakeLLM]] = {"anthropic": FakeAnthropic, "openai": FakeOpenAI}
OVERLOADED = {"anthropic": "overloaded_error", "openai": "server_error"}


@pytest.fixture(params=sorted(VENDORS))
async def fake(request: pytest.FixtureRequest) -> AsyncIterator[FakeLLM]:
    async with VENDORS[request.param]() as server:
        yield server


async def test_429_waits_as_long_as_retry_after_says(
    running: Running, session: ClientSession, fake: FakeLLM
) -> None:
    fake.add(
        fail(429, "rate_limit_error", "slow down", **{"retry-after": "0.3"}),
        Reply(text=["Made it."]),
    )
    app = await running(llm=llm_config(fake.vendor, fake))
    completed, _ = await ask_once(session, app)
    assert completed["text"] == "Made it."
    first, second = fake.requests
    assert second.at - first.at >= 0.29
    assert second.body == first.body  # the same call again


async def test_500_is_retried_with_backoff(
    running: Running, session: ClientSession, fake: FakeLLM
) -> None:
    fake.add(
        fail(500, "api_error", "internal"),
        fail(503, "api_error", "unavailable"),
        Reply(text=["Back."]),
    )
    app = await running(llm=llm_config(fake.vendor, fake, max_retries=2))
    completed, _ = await ask_once(session, app)
    assert completed["text"] == "Back."
    assert len(fake.requests) == 3


async def test_overloaded_mid_stream_restarts_without_showing_text_twice(
    running: Running, session: ClientSession, fake: FakeLLM
) -> None:
    fake.add(
        Reply(
            text=["Half an ", "answer "],
            error=OVERLOADED[fake.vendor],
            message="Overloaded",
            delay_s=0.03,
        ),
        Reply(text=["A whole ", "answer."], delay_s=0.03),
    )
    app = await running(llm=llm_config(fake.vendor, fake))
    completed, frames = await ask_once(session, app)
    assert completed["text"] == "A whole answer."
    assert len(fake.requests) == 2
    shown = [f["text"] for f in frames if f["type"] in ("message.updated", "message.completed")]
    assert any(text.startswith("Half") for text in shown), "the partial answer never streamed"
    assert not any("Half" in text and "whole" in text for text in shown), shown
    assert [f["type"] for f in frames].count("message.created") == 1  # one reply, edited


async def test_a_stalled_stream_hits_the_first_token_deadline(
    running: Running, session: ClientSession, fake: FakeLLM
) -> None:
    fake.add(Reply(text=["never"], stall_after=2), Reply(text=["Fresh answer."]))
    # deadlines generous enough for a loaded CI machine; the bounds only show the deadline acted
    app = await running(llm=llm_config(fake.vendor, fake, first_token_timeout_s=1.0))
    started = time.monotonic()
    completed, _ = await ask_once(session, app)
    assert completed["text"] == "Fresh answer."
    assert len(fake.requests) == 2
    assert 0.9 <= fake.requests[1].at - fake.requests[0].at < 6
    assert time.monotonic() - started < 10


async def test_a_bad_request_is_not_retried(
    running: Running, session: ClientSession, fake: FakeLLM
) -> None:
    fake.add(fail(400, "invalid_request_error", "messages: field required"))
    app = await running(llm=llm_config(fake.vendor, fake, max_retries=3))
    completed, _ = await ask_once(session, app)
    assert completed["text"].startswith("Sorry — the AI model refused the request")
    assert len(fake.requests) == 1


async def test_fallback_to_the_other_vendor(running: Running, session: ClientSession) -> None:
    async with FakeAnthropic() as primary, FakeOpenAI() as backup:
        primary.add(
            fail(529, "overloaded_error", "Overloaded"), fail(529, "overloaded_error", "Overloaded")
        )
        backup.add(Reply(text=["From the backup."], usage=(20, 4)))
        fallback = {
            "provider": "openai",
            "base_url": backup.url,
            "api_key": "test-key",
            "model": "backup-model",
        }
        llm = llm_config("anthropic", primary, max_retries=1, fallback=[fallback])
        app = await running(llm=llm)
        completed, _ = await ask_once(session, app)
        assert by_backup(completed["text"], "From the backup."), completed["text"]
        assert len(primary.requests) == 2 and len(backup.requests) == 1
        assert backup.requests[0].body["model"] == "backup-model"
        usage = db_rows(app, "select provider, model, input_tokens, output_tokens from usage")
        assert usage == [("openai", "backup-model", 20, 4)]


async def test_out_of_credit_falls_back_at_once(running: Running, session: ClientSession) -> None:
    async with FakeAnthropic() as primary, FakeOpenAI() as backup:
        primary.add(
            fail(400, "invalid_request_error", "Your credit balance is too low to access the API")
        )
        backup.add(Reply(text=["Still here."]))
        fallback = {"provider": "openai", "base_url": backup.url, "api_key": "test-key"}
        app = await running(
            llm=llm_config("anthropic", primary, max_retries=2, fallback=[fallback])
        )
        completed, _ = await ask_once(session, app)
        assert by_backup(completed["text"], "Still here."), completed["text"]
        assert len(primary.requests) == 1


async def test_when_every_provider_fails_the_placeholder_says_sorry(
    running: Running, session: ClientSession
) -> None:
    async with FakeAnthropic() as primary, FakeOpenAI() as backup:
        primary.add(fail(400, "invalid_request_error", "Your credit balance is too low"))
        backup.add(fail(503, "server_error", "down"))
        fallback = {"provider": "openai", "base_url": backup.url, "api_key": "test-key"}
        app = await running(
            llm=llm_config("anthropic", primary, max_retries=0, fallback=[fallback])
        )
        completed, frames = await ask_once(session, app)
        # the rejection wins: it is the one an admin can fix
        assert completed["text"] == f"Sorry — {OUT_OF_CREDIT}"
        created = next(f for f in frames if f["type"] == "message.created")
        assert completed["message_id"] == created["message_id"]
        [(status, error)] = db_rows(app, "select status, error from turns")
        assert status == "failed" and error.startswith("ProviderRejected")


async def test_unavailable_everywhere_is_a_try_again_later(
    running: Running, session: ClientSession, fake: FakeLLM
) -> None:
    fake.add(*[fail(502, "api_error", "bad gateway")] * 2)
    app = await running(llm=llm_config(fake.vendor, fake, max_retries=1))
    completed, _ = await ask_once(session, app)
    assert completed["text"] == f"Sorry — {ProviderUnavailable.user_message}"
    assert len(fake.requests) == 2


async def test_a_server_that_is_not_there_falls_back(
    running: Running, session: ClientSession
) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
    async with FakeOpenAI() as backup:
        backup.add(Reply(text=["Answered by the backup."]))
        fallback = {"provider": "openai", "base_url": backup.url, "api_key": "test-key"}
        llm = llm_config("anthropic", backup, base_url=dead, max_retries=1, fallback=[fallback])
        app = await running(llm=llm)
        completed, _ = await ask_once(session, app)
        assert by_backup(completed["text"], "Answered by the backup."), completed["text"]


# frames up to and with the first text delta: message_start, ping, content_block_start, delta;
# or the role chunk and the first content chunk
FIRST_TEXT_FRAMES = {"anthropic": 4, "openai": 2}


@pytest.mark.parametrize("vendor", sorted(VENDORS))
async def test_keepalives_after_the_first_token_end_at_the_total_deadline(
    running: Running, session: ClientSession, vendor: str
) -> None:
    """Pings (Anthropic) and SSE comments (OpenAI-compatible) reach httpx but not us: the read
    timeout never fires, so the total deadline must bound every wait, not only the first."""
    other = next(v for v in VENDORS if v != vendor)
    async with VENDORS[vendor]() as primary, VENDORS[other]() as backup:
        primary.add(
            Reply(text=["Hello", " never"], stall_after=FIRST_TEXT_FRAMES[vendor], keepalive_s=0.05)
        )
        backup.add(Reply(text=["From the backup."]))
        fallback = {"provider": other, "base_url": backup.url, "api_key": "test-key"}
        llm = llm_config(
            vendor, primary, first_token_timeout_s=1.0, total_timeout_s=2.0, max_retries=0,
            fallback=[fallback],
        )  # fmt: skip
        app = await running(llm=llm)
        completed, _ = await ask_once(session, app)
        assert by_backup(completed["text"], "From the backup."), completed["text"]
        # measured from when the server saw the request, a little after the client started it
        assert 1.9 <= backup.requests[0].at - primary.requests[0].at < 6


async def test_a_malformed_stream_event_is_retried(
    running: Running, session: ClientSession, fake: FakeLLM
) -> None:
    # a data line cut in half (a broken proxy): the SDK's json.loads fails inside the stream
    fake.add(Reply(text=["Half ", "an answer"], garble_at=2), Reply(text=["Clean."]))
    app = await running(llm=llm_config(fake.vendor, fake))
    completed, _ = await ask_once(session, app)
    assert completed["text"] == "Clean."
    assert len(fake.requests) == 2


async def test_a_stream_event_of_the_wrong_shape_is_retried(
    running: Running, session: ClientSession, fake: FakeLLM
) -> None:
    # JSON, but not what the API sends: the provider reads the parsed JSON itself, and a field
    # of the wrong type is a broken stream to retry, not a crash of the turn
    fake.add(Reply(text=["Half ", "an answer"], reshape_at=2), Reply(text=["Clean."]))
    app = await running(llm=llm_config(fake.vendor, fake))
    completed, _ = await ask_once(session, app)
    assert completed["text"] == "Clean."
    assert len(fake.requests) == 2


async def test_malformed_events_everywhere_fall_back(
    running: Running, session: ClientSession
) -> None:
    async with FakeOpenAI() as primary, FakeAnthropic() as backup:
        primary.add(*[Reply(text=["Half ", "an answer"], garble_at=2)] * 2)
        backup.add(Reply(text=["From the backup."]))
        fallback = {"provider": "anthropic", "base_url": backup.url, "api_key": "test-key"}
        app = await running(llm=llm_config("openai", primary, max_retries=1, fallback=[fallback]))
        completed, _ = await ask_once(session, app)
        assert by_backup(completed["text"], "From the backup."), completed["text"]
        assert len(primary.requests) == 2
