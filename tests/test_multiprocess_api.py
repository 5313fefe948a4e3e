"""The sessions API on several real `bot serve` processes (one SQLite file, one Redis), as behind
a load balancer: a message posted to one process streams from another, a dropped stream resumes
by `Last-Event-ID` on a third, and messages posted to different processes while the bot answers
are answered together, each stream ending with that joint answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest

from adapters.api.keys import hash_key
from bot.pipeline.turn import STOPPED
from bot.redis.client import connect
from tests.api_kit import KEY_A, ApiClient, Event, Stream, read_events
from tests.fake_llm import Reply, llm_config
from tests.fake_openai import FakeOpenAI
from tests.processes import Gateway, gateways, write_config
from tests.redis_kit import URL, prefix

__all__ = ["prefix"]
# three `bot serve` starts on a loaded 2-core machine
pytestmark = [pytest.mark.process, pytest.mark.timeout(300)]
WAIT_S = 60.0


@pytest.fixture
async def model() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        yield fake


def _config(folder: Path, prefix: str, model: FakeOpenAI) -> Path:
    api = {
        "enabled": True,
        "keys": [{"id": "a", "sha256": hash_key(KEY_A)}],
        "stream_timeout_s": WAIT_S,  # a stream that misses its answer ends with an error event
    }
    return write_config(
        folder,
        redis={"url": "${REDIS_URL}", "prefix": prefix},
        llm=llm_config("openai", model, max_retries=0, first_token_timeout_s=120),
        channels={"api": api, "websocket": {"enabled": False}},
    )


class Client(ApiClient):
    """An API client talking to one process (`base` is that process's /api/v1)."""

    def __init__(self, session: aiohttp.ClientSession, gateway: Gateway) -> None:
        self.http = session
        self.base = f"{gateway.url}/api/v1"
        self.key = KEY_A


async def _queued(prefix: str, session_id: str, count: int) -> None:
    """Until `count` messages wait in the session's conversation queue in Redis."""
    redis = connect(URL)
    try:
        async with asyncio.timeout(WAIT_S):
            key = f"{prefix}q:api:{session_id}:in"
            while await redis.llen(key) < count:  # noqa: ASYNC110 (no event to wait on)
                await asyncio.sleep(0.02)
    finally:
        await redis.aclose()


async def _follow(client: Client, session_id: str) -> list[Event]:
    """A follower's events until the first `message.completed`."""
    url = f"{client.base}/sessions/{session_id}/events"
    events: list[Event] = []
    async with client.http.get(url, headers=client.headers()) as response:
        async for event in read_events(response):
            if event is not None:
                events.append(event)
                if event.type == "message.completed":
                    break
    return events


def _completed(stream: Stream) -> str:
    assert stream.types()[-1] == "message.completed", stream.events
    return str(stream.last("message.completed")["text"])


async def test_a_message_posted_to_one_process_streams_from_another_and_resumes_on_a_third(
    prefix: str, tmp_path: Path, session: aiohttp.ClientSession, model: FakeOpenAI
) -> None:
    hold = asyncio.Event()
    answer = "one two three four five six"
    words = answer.split(" ")
    model.add(Reply(text=[words[0], *(f" {w}" for w in words[1:])], wait=hold, delay_s=0.02))
    async with gateways(3, _config(tmp_path, prefix, model), {"REDIS_URL": URL}) as processes:
        a, b, c = (Client(session, g) for g in processes)
        sid = await a.new_session(user_id="42")
        follower = asyncio.create_task(_follow(b, sid))
        while True:  # noqa: ASYNC110 (the follower on B is attached once /healthz counts it)
            async with session.get(f"{processes[1].url}/healthz") as response:
                if (await response.json())["api_streams"]:
                    break
            await asyncio.sleep(0.02)
        first = await a.ask(sid, "count", client_message_id="c1", until=1)  # then it drops
        assert first.types() == ["message.created"]
        seen = first.ids()[-1]
        hold.set()
        again = await c.stream(
            "POST",
            f"/sessions/{sid}/messages",
            {"text": "count", "client_message_id": "c1"},
            headers={"Last-Event-ID": str(seen)},
        )
        assert min(again.ids()) > seen  # only what the client had not seen, from another process
        assert _completed(again) == answer
        followed = await b.stream(
            "GET", f"/sessions/{sid}/events", until=1, headers={"Last-Event-ID": str(seen)}
        )
        assert followed.ids()[0] > seen  # a follower resumes on any process too (from what is
        # kept: an update superseded by a later one is not)
        live = await asyncio.wait_for(follower, WAIT_S)  # B saw the whole turn, run elsewhere
        assert live[0].data["reply_to"] == "c1" and live[-1].data["text"] == answer
        as_json = await a.call(
            "POST",
            f"/sessions/{sid}/messages",
            {"text": "count", "client_message_id": "c1"},
            {"Accept": "application/json"},
        )
        assert as_json[0] == 200 and as_json[1]["text"] == answer
    assert len(model.requests) == 1  # every resend, on every process, was the same message


async def test_messages_posted_to_different_processes_meanwhile_end_with_their_joint_answer(
    prefix: str, tmp_path: Path, session: aiohttp.ClientSession, model: FakeOpenAI
) -> None:
    hold = asyncio.Event()
    model.add(Reply(text=["first answer"], wait=hold), Reply(text=["joint answer"]))
    async with gateways(3, _config(tmp_path, prefix, model), {"REDIS_URL": URL}) as processes:
        a, b, c = (Client(session, g) for g in processes)
        sid = await a.new_session()
        one = asyncio.create_task(a.ask(sid, "one", client_message_id="m1"))
        await model.wait_requests(1, WAIT_S)
        two = asyncio.create_task(b.ask(sid, "two", client_message_id="m2"))
        await _queued(prefix, sid, 1)
        three = asyncio.create_task(c.ask(sid, "three", client_message_id="m3"))
        await _queued(prefix, sid, 2)
        hold.set()
        streams = await asyncio.wait_for(asyncio.gather(one, two, three), WAIT_S)
    assert [_completed(s) for s in streams] == ["first answer", "joint answer", "joint answer"]
    assert len(model.requests) == 2
    assert "two" in str(model.requests[1].body["messages"][-1])


@asynccontextmanager
async def _a_turn_held_on_a(
    prefix: str, tmp_path: Path, session: aiohttp.ClientSession, model: FakeOpenAI
) -> AsyncIterator[tuple[Client, Client, str, asyncio.Task[Stream]]]:
    """Processes A and B; A runs the turn for `j1` of a new session, held at the model to the end."""
    hold = asyncio.Event()
    model.add(Reply(text=["never shown"], wait=hold))
    async with gateways(2, _config(tmp_path, prefix, model), {"REDIS_URL": URL}) as processes:
        a, b = (Client(session, g) for g in processes)
        sid = await a.new_session()
        running = asyncio.create_task(a.ask(sid, "a long job", client_message_id="j1"))
        await model.wait_requests(1, WAIT_S)
        yield a, b, sid, running
        hold.set()


async def test_a_stop_posted_to_one_process_ends_the_answer_another_runs(
    prefix: str, tmp_path: Path, session: aiohttp.ClientSession, model: FakeOpenAI
) -> None:
    async with _a_turn_held_on_a(prefix, tmp_path, session, model) as (a, b, sid, running):
        assert await b.call("POST", f"/sessions/{sid}/stop") == (202, {"status": "stop_requested"})
        assert _completed(await asyncio.wait_for(running, WAIT_S)) == STOPPED


async def test_a_message_a_stop_on_another_process_dropped_is_told_so_everywhere(
    prefix: str, tmp_path: Path, session: aiohttp.ClientSession, model: FakeOpenAI
) -> None:
    async with _a_turn_held_on_a(prefix, tmp_path, session, model) as (a, b, sid, running):
        queued = asyncio.create_task(a.ask(sid, "and then this", client_message_id="q1"))
        await _queued(prefix, sid, 1)
        assert await b.call("POST", f"/sessions/{sid}/stop") == (202, {"status": "stop_requested"})
        dropped = await asyncio.wait_for(queued, WAIT_S / 2)  # not at stream_timeout_s
        assert dropped.types()[-1] == "message.dropped"
        assert dropped.last("message.dropped")["message_id"] == "q1"
        assert _completed(await asyncio.wait_for(running, WAIT_S)) == STOPPED
        again = await asyncio.wait_for(b.ask(sid, "and then this", client_message_id="q1"), WAIT_S)
        assert again.types() == ["message.dropped"]
    assert len(model.requests) == 1
