"""Quotas: an over-quota turn never reaches the model and says so in its placeholder; windows."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession

from adapters.base import ChatRef, InboundMessage
from bot.pipeline.quota import MemoryQuotaState, Quotas
from bot.runtime.app import App
from bot.runtime.config import ConfigError
from bot.runtime.config.schema import QuotaLimits, QuotasConfig
from tests.conftest import Running, WsClient, connect, db_rows, make_config
from tests.fake_llm import Reply, llm_config
from tests.fake_openai import FakeOpenAI
from tests.telegram_fake import TOKEN, FakeBotAPI

MIDDAY = 1_767_225_600 + 12 * 3600 + 30  # 2026-01-01 12:00:30 UTC


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def message(user: str = "u1", chat: str = "c1", event: str = "e") -> InboundMessage:
    return InboundMessage(ChatRef("telegram", chat), user, "hi", event)


def quotas(clock: Clock, **config: Any) -> Quotas:
    return Quotas(QuotasConfig(**config), MemoryQuotaState(clock=clock), clock=clock)


@pytest.fixture
async def model() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        yield fake


async def _ask(client: WsClient, text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The placeholder (`message.created`) and the final frame of one message."""
    start = len(client.frames)
    await client.send(type="message", text=text)
    final = await client.until_type("message.completed")
    created = [f for f in client.frames[start:] if f["type"] == "message.created"]
    assert len(created) == 1, client.frames[start:]
    return created[0], final


async def test_an_over_quota_turn_makes_no_model_call_and_edits_its_placeholder(
    running: Running, model: FakeOpenAI, session: ClientSession
) -> None:
    model.add(Reply(["Hello there."], usage=(40, 10)))
    app = await running(
        llm=llm_config("openai", model),
        quotas={"per_user": {"turns_per_day": 1}},
    )
    client = await connect(session, app)
    await client.hello()
    _, first = await _ask(client, "hi")
    assert first["text"] == "Hello there." and len(model.requests) == 1

    placeholder, refused = await _ask(client, "and again")
    assert refused["message_id"] == placeholder["message_id"]  # edited in place, not a new one
    assert refused["text"].startswith("Sorry — you've reached today's limit (1 message a day)")
    assert "it resets at 00:00 UTC" in refused["text"]
    assert len(model.requests) == 1  # the model never saw the second message
    assert db_rows(app, "select count(*) from usage") == [(1,)]


async def test_on_telegram_the_refusal_is_an_edit_of_the_placeholder(
    tmp_path: Path, model: FakeOpenAI
) -> None:
    model.add(Reply(["First answer."]))
    api = FakeBotAPI(interval_s=0.05)
    await api.start()
    telegram = {
        "enabled": True,
        "token": TOKEN,
        "api_base": api.url,
        "private_edit_interval_s": 0.05,
    }
    config = make_config(
        tmp_path,
        channels={"telegram": telegram},
        llm=llm_config("openai", model),
        quotas={"per_user": {"turns_per_minute": 1}, "exempt_users": ["telegram:7"]},
    )
    try:
        async with App(config, base_dir=tmp_path):
            api.push(api.message(42, "one"))
            await api.wait_for(
                lambda: [c.text for c in api.ok(42, "editMessageText")][-1:] == ["First answer."]
            )
            api.push(api.message(42, "two"))
            await api.wait_for(lambda: len(api.ok(42, "editMessageText")) == 2)
            sends, edits = api.ok(42, "sendMessage"), api.ok(42, "editMessageText")
            assert len(sends) == 2  # one placeholder per message, nothing else sent
            assert edits[1].params["message_id"] == sends[1].message_id
            assert (edits[1].text or "").startswith(
                "Sorry — you've reached the limit of 1 message a minute"
            )
            assert len(model.requests) == 1
    finally:
        await api.close()


async def test_tokens_used_count_against_the_next_turn(
    running: Running, model: FakeOpenAI, session: ClientSession
) -> None:
    model.add(Reply(["Long answer."], usage=(900, 200)), Reply(["never sent"]))
    app = await running(
        llm=llm_config("openai", model),
        quotas={"per_conversation": {"tokens_per_day": 1000}},
    )
    client = await connect(session, app)
    await client.hello()
    assert (await _ask(client, "one"))[1]["text"] == "Long answer."
    _, refused = await _ask(client, "two")
    assert "this conversation has reached today's limit (1,000 tokens a day)" in refused["text"]
    assert len(model.requests) == 1


async def test_the_minute_window_resets_at_the_next_minute() -> None:
    clock = Clock(MIDDAY)
    limits = quotas(clock, per_user={"turns_per_minute": 2})
    assert await limits.admit(message(event="1")) is None
    assert await limits.admit(message(event="2")) is None
    refusal = await limits.admit(message(event="3"))
    assert refusal is not None
    assert "the limit of 2 messages a minute; it resets at 12:01:00 UTC (in 30 s)" in refusal
    assert await limits.admit(message(user="u2")) is None  # another user has their own
    clock.now += 30  # 12:01:00: a new minute
    assert await limits.admit(message(event="4")) is None


async def test_the_day_window_resets_at_midnight_utc_and_the_refusal_names_it() -> None:
    clock = Clock(MIDDAY)
    limits = quotas(clock, per_user={"turns_per_minute": 5, "tokens_per_day": 100})
    assert await limits.admit(message()) is None
    await limits.spend(message(), 100)
    refusal = await limits.admit(message())
    assert refusal is not None and "today's limit (100 tokens a day)" in refusal
    clock.now += 11 * 3600  # 23:00:30, still the same day
    assert await limits.admit(message()) is not None
    clock.now += 3600  # 00:00:30 the next day
    assert await limits.admit(message()) is None


async def test_refused_turns_are_not_counted() -> None:
    clock = Clock(MIDDAY)
    limits = quotas(clock, per_user={"turns_per_minute": 1, "turns_per_day": 2})
    assert await limits.admit(message()) is None
    for _ in range(5):
        assert await limits.admit(message()) is not None  # the minute limit
    clock.now += 60
    assert (
        await limits.admit(message()) is None
    )  # the day's second turn: five refusals did not count


async def test_exempt_users_and_system_events_are_not_limited() -> None:
    clock = Clock(MIDDAY)
    limits = quotas(clock, per_user={"turns_per_day": 0}, exempt_users=["admin", "slack:U42"])
    assert await limits.admit(message(user="admin")) is None
    assert await limits.admit(InboundMessage(ChatRef("slack", "C1"), "U42", "x", "e")) is None
    assert await limits.admit(InboundMessage(ChatRef("web", "C1"), "U42", "x", "e")) is not None
    assert await limits.admit(message(event="task:abc")) is None  # a background result
    assert await limits.admit(message()) is not None


def test_a_web_visitor_cannot_be_exempt_for_anyone_may_claim_its_id(tmp_path: Path) -> None:
    for visitor in ("websocket:v:ops-team-laptop", "v:ops-team-laptop"):
        with pytest.raises(ConfigError, match="quotas.exempt_users"):
            make_config(tmp_path, quotas={"exempt_users": [visitor]})
    signed = make_config(tmp_path, quotas={"exempt_users": ["websocket:u:ops-team"]})
    assert signed.quotas.exempt_users == ["websocket:u:ops-team"]


async def test_a_background_result_is_never_refused_but_its_tokens_count() -> None:
    clock = Clock(MIDDAY)
    limits = quotas(clock, per_user={"tokens_per_day": 50})
    await limits.spend(message(), 60)
    assert await limits.admit(message(event="task:abc")) is None
    await limits.spend(message(event="task:abc"), 10)
    state = limits.state
    day = MIDDAY - MIDDAY % 86400
    assert await state.counts([f"user:telegram:u1:day:{day}"]) == {
        f"user:telegram:u1:day:{day}": (0, 70)
    }


async def test_a_conversation_limit_binds_every_user_in_it() -> None:
    clock = Clock(MIDDAY)
    limits = quotas(clock, per_conversation={"turns_per_day": 2})
    assert await limits.admit(message(user="a")) is None
    assert await limits.admit(message(user="b")) is None
    refusal = await limits.admit(message(user="c"))
    assert refusal is not None and refusal.startswith("Sorry — this conversation has reached")
    assert await limits.admit(message(user="c", chat="other")) is None


async def test_without_limits_nothing_is_counted() -> None:
    state = MemoryQuotaState()
    config = QuotasConfig(per_user=QuotaLimits(turns_per_day=None))
    limits = Quotas(config, state, clock=Clock(MIDDAY))
    assert not limits.counts_tokens
    assert await limits.admit(message()) is None
    assert await state.counts([f"user:telegram:u1:day:{MIDDAY - MIDDAY % 86400}"]) == {}
