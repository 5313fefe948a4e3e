"""kill -9 at the exact moments a turn is most fragile, with real `bot serve` processes.

- Answered, but Redis not yet told: the process delivered the final answer and recorded the turn
  as completed, then died before it let go of the batch in Redis. The process that takes the
  batch over must see that the turn ended and answer nothing a second time.
- Posting the placeholder: the process died while Telegram carried out its "Thinking…" message
  (the answer with the message's id never reached it). The turn was recorded before the post,
  so a restart finishes it: the user gets the one answer instead of silence.

The moment is hit every time, without touching our code: the fake Bot API holds its answer
(the placeholder case), or freezes the process's Redis traffic in a proxy the instant it
receives the final edit (`tests/redis_proxy.py`); the test then kills the process.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from redis.asyncio import Redis

from tests import kill_kit
from tests.fake_llm import Reply
from tests.fake_openai import FakeOpenAI
from tests.kill_kit import WAIT_S, deliver, our_logs, rows, until
from tests.processes import HERE, one_gateway
from tests.redis_kit import URL, redis_prefix
from tests.redis_proxy import HoldingProxy
from tests.telegram_fake import Call, FakeBotAPI

pytestmark = [pytest.mark.process, pytest.mark.timeout(600)]  # several `bot serve` starts
CHAT = 5151
ANSWER = "An assessment costs 100.00 USD."
AGAIN = "An assessment costs 100.00 USD (a second answer: the turn ran twice)."


async def until_idle(redis: Redis, prefix: str) -> None:
    """Until no conversation has work queued or running (Redis's own record of it)."""
    async with asyncio.timeout(WAIT_S):
        while await redis.zcard(f"{prefix}q:busy"):  # noqa: ASYNC110
            await asyncio.sleep(0.05)


class _AnswerWatch(FakeBotAPI):
    """The Bot API that calls `on_answer` the instant it carries out the edit showing ANSWER,
    before it answers that edit."""

    on_answer: Any = None

    async def _method(self, call: Call) -> Any:
        result = await super()._method(call)
        if call.method == "editmessagetext" and call.text == ANSWER and self.on_answer:
            self.on_answer()
        return result


@pytest.fixture
async def shared() -> AsyncIterator[tuple[Redis, str]]:
    async with redis_prefix() as found:
        yield found


@pytest.fixture
async def model() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def fake() -> AsyncIterator[_AnswerWatch]:
    api = _AnswerWatch(interval_s=0.05)
    await api.start()
    yield api
    await api.close()


async def test_a_turn_answered_right_before_its_process_died_is_not_answered_again(
    shared: tuple[Redis, str],
    tmp_path: Path,
    session: aiohttp.ClientSession,
    fake: _AnswerWatch,
    model: FakeOpenAI,
) -> None:
    redis, prefix = shared
    model.add(Reply(text=[ANSWER]), Reply(text=[AGAIN]))
    # a lease well past the 2 s a held Redis call takes to time out (the rate budget's, after
    # the edit): the process records the turn as answered before anyone may take it over
    config = kill_kit.config(tmp_path, fake, model, prefix, lease_s=5)
    proxy = HoldingProxy(URL)
    fake.on_answer = proxy.hold  # the answer is shown: from now on Redis hears nothing from it
    update = fake.message(CHAT, "What does an assessment cost?")
    try:
        async with AsyncExitStack() as stack:
            gateway = one_gateway(config, kill_kit.env(await proxy.start()))
            first = await stack.enter_async_context(gateway)
            running = [first]
            try:
                assert await deliver(session, first, update) == 200
                await until(lambda: first.logged(HERE) > 0)  # the turn runs in `first`, alone yet
                # started now: a webhook's update goes to whichever process reads first
                second = await stack.enter_async_context(one_gateway(config, kill_kit.env(URL)))
                running.append(second)
                # the turn is recorded as answered, and the batch's release waits in the proxy
                await until(lambda: rows(tmp_path, "select status from turns") == [("completed",)])
                await until(lambda: proxy.held > 0)
                first.process.kill()  # SIGKILL: Redis still holds the batch as unfinished
                await first.process.wait()
                # its lease runs out; `second` takes the batch over
                await until(
                    lambda: (
                        second.logged("had ended") + second.logged("resuming turn") > 0
                        or len(fake.ok(CHAT, "sendMessage")) > 1
                    )
                )
                assert second.logged("had ended") == 1
                await until_idle(redis, prefix)  # whatever `second` does with the batch, done
            except (AssertionError, TimeoutError):
                raise AssertionError(f"the logs (ours):\n{our_logs(*running)}") from None
    finally:
        await proxy.close()

    placeholder = fake.ok(CHAT, "sendMessage")
    assert [c.params["text"] for c in placeholder] == ["Thinking…"]  # no second placeholder
    assert fake.messages == {(CHAT, placeholder[0].message_id or 0): ANSWER}
    assert len(model.requests) == 1  # the turn did not run again
    assert rows(tmp_path, "select status, final_text from turns") == [("completed", ANSWER)]


async def test_a_turn_killed_while_its_placeholder_was_posted_is_answered_after_a_restart(
    tmp_path: Path,
    session: aiohttp.ClientSession,
    fake: _AnswerWatch,
    model: FakeOpenAI,
) -> None:
    model.add(Reply(text=[ANSWER]))
    config = kill_kit.config(tmp_path, fake, model, None)  # embedded: one process, no Redis
    fake.hang_answer_next["sendmessage"] = 1  # "Thinking…" is posted; its id never comes back
    update = fake.message(CHAT, "What does an assessment cost?")
    async with one_gateway(config, kill_kit.env()) as first:
        assert await deliver(session, first, update) == 200
        await fake.wait_for(lambda: len(fake.to_chat(CHAT, "sendMessage")) == 1, WAIT_S)
        first.process.kill()
        await first.process.wait()
    async with one_gateway(config, kill_kit.env()) as second:
        try:
            assert await deliver(session, second, update) == 200  # Telegram's retry: answered once
            await fake.wait_for(lambda: ANSWER in fake.messages.values(), WAIT_S)
            await until(lambda: rows(tmp_path, "select status from turns") == [("completed",)])
        except (AssertionError, TimeoutError):
            raise AssertionError(f"the logs (ours):\n{our_logs(first, second)}") from None

    assert len(model.requests) == 1
    assert rows(tmp_path, "select status, resume_attempts, final_text from turns") == [
        ("completed", 1, ANSWER)
    ]
    posts = fake.ok(CHAT, "sendMessage")
    assert [c.params["text"] for c in posts] == ["Thinking…", "Thinking…"]
    orphan, answered = (c.message_id or 0 for c in posts)
    assert fake.messages[(CHAT, answered)] == ANSWER
    # The dead process never learned the first message's id, so nothing can edit it: it is
    # left as it was (Telegram has no idempotent send and no way to list a bot's messages).
    assert fake.messages[(CHAT, orphan)] == "Thinking…"


async def test_a_process_frozen_past_its_lease_leaves_the_turn_to_the_one_that_took_it_over(
    shared: tuple[Redis, str],
    tmp_path: Path,
    session: aiohttp.ClientSession,
    fake: _AnswerWatch,
    model: FakeOpenAI,
) -> None:
    """Not dead, only frozen (SIGSTOP: a stalled VM, a starved machine) for longer than its
    lease: another process takes the turn over and answers. When the frozen one wakes, its
    lease is gone (fencing), and it must change nothing the user sees: no "Stopped" over the
    answer, no second answer, the turn's record left as the new holder wrote it."""
    _, prefix = shared
    model.add(Reply(stall_after=0), Reply(text=[ANSWER]))  # the first stalls until it is frozen
    config = kill_kit.config(tmp_path, fake, model, prefix)
    update = fake.message(CHAT, "What does an assessment cost?")
    async with (
        one_gateway(config, kill_kit.env(URL)) as first,
        one_gateway(config, kill_kit.env(URL)) as second,
    ):
        try:
            assert await deliver(session, first, update) == 200
            await model.wait_requests(1, timeout=WAIT_S)
            # a webhook's update goes to whichever process reads the queue first: freeze that one
            await until(lambda: first.logged(HERE) + second.logged(HERE) > 0)
            frozen = first if first.logged(HERE) else second
            frozen.process.send_signal(signal.SIGSTOP)
            try:
                await fake.wait_for(lambda: ANSWER in fake.messages.values(), WAIT_S)
                await until(lambda: rows(tmp_path, "select status from turns") == [("completed",)])
            finally:
                frozen.process.send_signal(signal.SIGCONT)
            await until(lambda: frozen.logged("lease lost") > 0)
            await until(lambda: frozen.logged("turn stopped in") + frozen.logged("left to") > 0)
        except (AssertionError, TimeoutError):
            raise AssertionError(f"the logs (ours):\n{our_logs(first, second)}") from None

    placeholder = fake.ok(CHAT, "sendMessage")
    assert [c.params["text"] for c in placeholder] == ["Thinking…"]
    assert fake.messages == {(CHAT, placeholder[0].message_id or 0): ANSWER}
    assert rows(tmp_path, "select status, resume_attempts, final_text from turns") == [
        ("completed", 1, ANSWER)
    ]
