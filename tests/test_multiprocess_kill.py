"""kill -9 of the `bot serve` running a turn, with two processes on one SQLite file and one Redis:
the other process takes the conversation over once the dead one's lease runs out and finishes
the turn INTO THE SAME Telegram placeholder. The payment order made before the kill is replayed,
not made again; the user gets one answer; Telegram's redelivery of the update to the survivor
(before and after the takeover) gets no second placeholder or answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from tests import kill_kit
from tests.fake_llm import Call, Reply
from tests.fake_openai import FakeOpenAI
from tests.kill_kit import LEASE_S, WAIT_S, deliver, our_logs, rows
from tests.processes import HERE, gateways
from tests.redis_kit import URL, prefix
from tests.telegram_fake import FakeBotAPI

__all__ = ["prefix"]
# Two `bot serve` starts on a loaded 2-core machine (a start alone has taken 20 s and more).
pytestmark = [pytest.mark.process, pytest.mark.timeout(300)]
CHAT = 4343
PAY = Call("create_payment", '{"service": "ASSESSMENT", "category": "GENERAL", "method": "CARD"}')
ANSWER = "Your order is ready: pay 100.00 USD with the link before it expires."


@pytest.fixture
async def servers() -> AsyncIterator[tuple[FakeBotAPI, FakeOpenAI]]:
    async with kill_kit.fake_servers() as made:
        yield made


async def test_a_turn_killed_on_one_process_is_finished_by_another_in_its_placeholder(
    prefix: str,
    tmp_path: Path,
    session: aiohttp.ClientSession,
    servers: tuple[FakeBotAPI, FakeOpenAI],
) -> None:
    fake, model = servers
    # the order is created, then the model "thinks" until the process running the turn dies
    model.add(Reply(calls=[PAY]), Reply(stall_after=0))
    config = kill_kit.config(tmp_path, fake, model, prefix)
    update = fake.message(CHAT, "I want to pay for the assessment by card")
    async with gateways(2, config, kill_kit.env(URL)) as running:
        try:
            assert await deliver(session, running[0], update) == 200
            await model.wait_requests(2, timeout=WAIT_S)  # create_payment ran
            # a webhook's update goes to whichever process reads the queue first: kill that one
            first, second = running if running[0].logged(HERE) else running[::-1]
            first.process.kill()  # SIGKILL: no shutdown code runs
            await first.process.wait()
            killed = time.monotonic()
            placeholder = fake.ok(CHAT, "sendMessage")
            assert [c.params["text"] for c in placeholder] == ["Thinking…"]
            placeholder_id = placeholder[0].message_id
            assert placeholder_id is not None
            orders = rows(tmp_path, "select id from orders")
            assert len(orders) == 1
            assert first.logged(HERE) == 1 and second.logged(HERE) == 0

            model.add(Reply(text=[ANSWER]))
            # Telegram got no answer from the dead process: it redelivers, here to `second`
            assert await deliver(session, second, update) == 200
            await fake.wait_for(lambda: fake.messages.get((CHAT, placeholder_id)) == ANSWER, WAIT_S)
            takeover_s = time.monotonic() - killed
            assert await deliver(session, second, update) == 200  # and once more, later
            await asyncio.sleep(1.0)  # a second answer, if any, would be on its way by now
        except (AssertionError, TimeoutError):
            logs = our_logs(*running)
            raise AssertionError(f"the logs (ours):\n{logs}") from None
        assert second.logged("resuming turn") == 1
    print(f"takeover after kill -9: {takeover_s:.1f} s (lease {LEASE_S} s)")

    assert len(model.requests) == 3
    resumed = model.requests[2].body["messages"]
    tool_results = [m for m in resumed if m["role"] == "tool"]
    assert len(tool_results) == 1 and str(orders[0][0]) in tool_results[0]["content"]  # replayed
    assert [m["content"] for m in resumed if m["role"] == "user"] == [update["message"]["text"]]
    assert rows(tmp_path, "select count(*) from orders") == [(1,)]  # not created twice
    assert len(fake.ok(CHAT, "sendMessage")) == 1  # no second placeholder, no second answer
    edited = {c.params["message_id"] for c in fake.ok(CHAT, "editMessageText")}
    assert edited == {placeholder_id}
    assert rows(tmp_path, "select status, resume_attempts, final_text from turns") == [
        ("completed", 1, ANSWER)
    ]
