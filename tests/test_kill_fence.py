"""A process frozen past its lease with a tool call open writes nothing when it wakes: the
process that took the turn over answered that call, and a second result ("not finished", from
the woken one cancelling its work) would give the call id two results, which the vendors refuse
on the conversation's next request. Real `bot serve` processes, one SQLite file, one Redis."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from tests import kill_kit
from tests.fake_llm import Call, Reply
from tests.fake_openai import FakeOpenAI
from tests.kill_kit import WAIT_S, deliver, our_logs, rows, until
from tests.processes import one_gateway
from tests.redis_kit import URL, redis_prefix
from tests.telegram_fake import FakeBotAPI

pytestmark = [pytest.mark.process, pytest.mark.timeout(600)]  # several `bot serve` starts
CHAT = 5252
ANSWER = "One USD is 7.1 CNY today."
PERSONA = """---
name: default
description: Converts currencies.
tools: [get_exchange_rate]
---
You convert currencies.
"""


class Rates:
    """An exchange rate API whose first request is held (the frozen process's tool stays open)
    and whose later ones are answered at once (the process that took the turn over)."""

    def __init__(self) -> None:
        self.requests = 0
        self.first = asyncio.Event()
        self.release = asyncio.Event()
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def _rates(self, request: web.Request) -> web.Response:
        self.requests += 1
        if self.requests == 1:
            self.first.set()
            await self.release.wait()
        return web.json_response({"result": "success", "rates": {"CNY": 7.1}})

    async def __aenter__(self) -> Rates:
        app = web.Application()
        app.router.add_get("/{base}", self._rates)
        self.runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = self.runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}/{{base}}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release.set()
        assert self.runner is not None
        await self.runner.cleanup()


@pytest.fixture
async def model() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotAPI]:
    api = FakeBotAPI(interval_s=0.05)
    await api.start()
    yield api
    await api.close()


def _config(tmp_path: Path, fake: FakeBotAPI, model: FakeOpenAI, prefix: str, rates: str) -> Path:
    path = kill_kit.config(tmp_path, fake, model, prefix)
    (tmp_path / "personas" / "default.md").write_text(PERSONA)
    data = json.loads(path.read_text())
    # no timeout of its own may end the held call: only the lost lease does
    data["tools"] |= {"exchange_rate": {"url": rates}, "http_timeout_s": 600}
    data["agent"] = {"tool_timeout_s": 600, "turn_timeout_s": 600}
    path.write_text(json.dumps(data))
    return path


async def test_a_process_frozen_with_a_tool_call_open_adds_no_second_result(
    tmp_path: Path, session: aiohttp.ClientSession, fake: FakeBotAPI, model: FakeOpenAI
) -> None:
    call = Call("get_exchange_rate", '{"from": "USD", "to": "CNY"}', id="call_rate")
    model.add(Reply(calls=[call]), Reply(text=[ANSWER]))
    update = fake.message(CHAT, "How much is a dollar in yuan?")
    async with redis_prefix() as (_, prefix), Rates() as rates:
        config = _config(tmp_path, fake, model, prefix, rates.url)
        async with AsyncExitStack() as stack:
            first = await stack.enter_async_context(one_gateway(config, kill_kit.env(URL)))
            running = [first]
            try:
                assert await deliver(session, first, update) == 200
                async with asyncio.timeout(WAIT_S):
                    await rates.first.wait()  # the call is open in `first`, alone yet
                # started now: a webhook's update goes to whichever process reads first
                second = await stack.enter_async_context(one_gateway(config, kill_kit.env(URL)))
                running.append(second)
                first.process.send_signal(signal.SIGSTOP)
                try:
                    await fake.wait_for(lambda: ANSWER in fake.messages.values(), WAIT_S)
                    done = [("completed",)]
                    await until(lambda: rows(tmp_path, "select status from turns") == done)
                finally:
                    first.process.send_signal(signal.SIGCONT)
                await until(lambda: first.logged("left to the process that took it over") > 0)
            except (AssertionError, TimeoutError):
                raise AssertionError(f"the logs (ours):\n{our_logs(*running)}") from None

    results = rows(
        tmp_path, "select content from messages where tool_call_id = 'call_rate' order by id"
    )
    assert len(results) == 1 and "7.1" in results[0][0], results
    audit = rows(tmp_path, "select count(*) from audit_logs where call_id = 'call_rate'")
    assert audit == [(1,)]
    assert rows(tmp_path, "select status, final_text from turns") == [("completed", ANSWER)]
