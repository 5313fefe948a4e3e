"""A budget that bends: past a soft ratio the next turn goes to the cheaper model's own server,
with no specialist offered, and the user is told once; the hard limit still refuses. `/usage`
shows the sender's own turns, tokens and cost today and this month."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiohttp import ClientSession

from bot.storage import SqliteStore
from tests.conftest import Running, WsClient, connect
from tests.fake_llm import Reply, llm_config
from tests.fake_openai import FakeOpenAI

NOTICE = (
    "— 💸 you've used most of today's allowance, so GPT mini answers for now and specialists"
    " are paused until it resets."
)


@pytest.fixture
async def default_model() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
async def cheap_model() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(api_key="cheap-key") as fake:
        yield fake


def _tools(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools", [])]


async def _client(session: ClientSession, app: Any, visitor: str = "visitor-0001") -> WsClient:
    client = await connect(session, app)
    await client.hello(visitor)
    return client


async def test_past_the_soft_ratio_the_cheaper_model_answers_and_the_user_is_told_once(
    running: Running,
    default_model: FakeOpenAI,
    cheap_model: FakeOpenAI,
    session: ClientSession,
) -> None:
    default_model.add(Reply(["Full answer."], usage=(40, 30)))
    cheap_model.add(Reply(["Cheap one."]), Reply(["Cheap two."]), Reply(["never asked"]))
    cheap = {"name": "mini", "provider": "openai", "model": "cheap-model",
             "base_url": cheap_model.url, "api_key": cheap_model.api_key, "display": "GPT mini"}  # fmt: skip
    app = await running(
        llm=llm_config("openai", default_model, choices=[cheap]),
        quotas={"per_user": {"tokens_per_day": 100, "soft_ratio": 0.5}, "soft_model": "mini"},
    )
    client = await _client(session, app)
    assert (await client.ask("first"))["text"] == "Full answer."  # 70 tokens: past 50 %
    assert "AgentTool" in _tools(default_model.requests[0].body)

    second = (await client.ask("second"))["text"]
    assert second == f"Cheap one.\n\n{NOTICE}\n\n— answered by GPT mini"
    assert len(default_model.requests) == 1 and len(cheap_model.requests) == 1
    body = cheap_model.requests[0].body
    assert body["model"] == "cheap-model"
    assert "AgentTool" not in _tools(body) and _tools(body)  # no specialists; other tools stay

    third = (await client.ask("third"))["text"]  # 89 tokens: still under the hard limit
    assert third == "Cheap two.\n\n— answered by GPT mini"  # told once only

    refused = (await client.ask("fourth"))["text"]  # 108 tokens: the hard limit refuses
    assert refused.startswith("Sorry — you've reached today's limit (100 tokens a day)")
    assert len(cheap_model.requests) == 2 and len(default_model.requests) == 1

    async with session.get(f"{app.url}/metrics") as response:
        metrics = await response.text()
    assert 'gateway_quota_soft_crossed_total{scope="user"} 1.0' in metrics


async def test_the_notice_and_the_crossing_count_come_once_per_window(
    running: Running,
    default_model: FakeOpenAI,
    cheap_model: FakeOpenAI,
    session: ClientSession,
) -> None:
    """Every turn past the soft ratio goes cheap; the notice comes with the first of them only,
    and the crossing is counted once, not per turn."""
    default_model.add(Reply(["Full."], usage=(60, 0)))
    cheap_model.add(Reply(["Cheap A."]), Reply(["Cheap B."]))
    cheap = {"name": "mini", "provider": "openai", "model": "cheap-model",
             "base_url": cheap_model.url, "api_key": cheap_model.api_key}  # fmt: skip
    app = await running(
        llm=llm_config("openai", default_model, choices=[cheap]),
        quotas={"per_user": {"tokens_per_day": 100, "soft_ratio": 0.5}, "soft_model": "mini"},
    )
    client = await _client(session, app)
    await client.ask("first")
    notice = "you've used most of today's allowance"
    texts = [(await client.ask(text))["text"] for text in ("a", "b")]
    assert [notice in text for text in texts] == [True, False]
    assert all(text.endswith("— answered by mini") for text in texts)
    async with session.get(f"{app.url}/metrics") as response:
        assert 'gateway_quota_soft_crossed_total{scope="user"} 1.0' in await response.text()


async def test_usage_shows_the_users_own_turns_tokens_and_cost(
    running: Running, default_model: FakeOpenAI, session: ClientSession
) -> None:
    for n in range(4):
        default_model.add(Reply([f"answer {n}"], usage=(12, 7)))  # 19 tokens, 0.026 each
    app = await running(
        llm=llm_config("openai", default_model),
        usage={"prices": {"test-model": {"input_per_mtok": 1000, "output_per_mtok": 2000}}},
    )
    me, other = await _client(session, app), await _client(session, app, "visitor-0002")
    for text in ("one", "two", "three"):
        await me.ask(text)
    await other.ask("not mine")  # another user's turn counts for them only
    now = datetime.now(UTC)
    first_of_month = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    last_month = first_of_month - timedelta(days=3)
    assert isinstance(app.store, SqliteStore)
    with sqlite3.connect(app.store.path) as db:
        ids = [r[0] for r in db.execute("select id from turns order by created_at")][:2]
        for turn_id, when in zip(ids, (last_month, first_of_month), strict=True):
            stamp = when.isoformat()
            db.execute("update turns set created_at = ? where id = ?", (stamp, turn_id))
            db.execute("update usage set created_at = ? where turn_id = ?", (stamp, turn_id))
    today = 1 + (now.day == 1)  # the turn moved to the 1st is today's on the 1st
    reply = (await me.ask("/usage"))["text"]
    assert reply == "\n".join(
        [
            "**Your usage**",
            f"Today: {today} message(s), {19 * today} tokens, ${0.026 * today:.4f}",
            "This month: 2 message(s), 38 tokens, $0.0520",
        ]
    )
    # another visitor's own
    assert "Today: 1 message(s), 19 tokens, $0.0260" in (await other.ask("/usage"))["text"]


async def test_usage_with_an_unpriced_model_says_so(
    running: Running, default_model: FakeOpenAI, session: ClientSession
) -> None:
    default_model.add(Reply(["hi"], usage=(1000, 234)))
    app = await running(llm=llm_config("openai", default_model))
    client = await _client(session, app)
    await client.ask("hello")
    reply = (await client.ask("/usage"))["text"]
    assert "Today: 1 message(s), 1,234 tokens, cost not priced" in reply
