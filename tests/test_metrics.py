"""`GET /metrics`, read with prometheus-client's own parser, after turns we know the numbers of:
a tool call, a retry and a fallback through the real SDKs, a duplicate, a Telegram 429."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent.providers.scripted import Reply as Scripted
from agent.providers.scripted import ScriptedProvider
from bot.runtime.app import App
from tests.conftest import Running, connect, make_config
from tests.fake_anthropic import FakeAnthropic
from tests.fake_llm import Call, Reply, fail, llm_config
from tests.fake_openai import FakeOpenAI
from tests.telegram_fake import TOKEN, FakeBotAPI

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(session: aiohttp.ClientSession, app: App) -> Samples:
    async with session.get(f"{app.url}/metrics") as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = await response.text()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


async def test_turns_a_tool_a_retry_a_fallback_and_a_duplicate_are_counted(
    running: Running, session: aiohttp.ClientSession
) -> None:
    async with FakeOpenAI() as primary, FakeAnthropic() as backup:
        primary.add(
            Reply(calls=[Call("get_current_datetime", "{}")]),  # turn 1: a tool, then the answer
            Reply(text=["It is ", "noon."]),
            fail(503, "server_error"),  # turn 2: down, retried once, then the fallback answers
            fail(503, "server_error"),
        )
        backup.add(Reply(text=["From the ", "backup."], usage=(20, 4)))
        fallback = {"provider": "anthropic", "base_url": backup.url, "api_key": backup.api_key}
        llm = llm_config(
            "openai", primary, max_retries=1, fallback=[fallback | {"model": "backup-model"}]
        )
        app = await running(llm=llm)
        client = await connect(session, app)
        await client.hello(visitor_id="visitor-secret-42")
        assert (await client.ask("what time is it?", "m1"))["text"] == "It is noon."
        backup_note = "answered by the backup model (backup-model): the usual one did not answer"
        answer = (await client.ask("and now?", "m2"))["text"]
        assert answer == f"From the backup.\n\n— {backup_note}"  # never a silent fallback
        await app.gateway.wait_idle()
        await client.send(type="message", text="and now?", client_message_id="m2")  # resent
        # the duplicate is dropped without a frame: wait for the count itself
        for _ in range(500):
            samples = await scrape(session, app)
            if value(samples, "gateway_dedup_hits_total", channel="websocket"):
                break
        assert value(samples, "gateway_dedup_hits_total", channel="websocket") == 1

    completed = {"channel": "websocket", "outcome": "completed"}
    assert value(samples, "gateway_turns_total", **completed) == 2
    assert value(samples, "gateway_turn_seconds_count", **completed) == 2
    assert value(samples, "gateway_time_to_placeholder_seconds_count", channel="websocket") == 2
    placeholder_sum = value(samples, "gateway_time_to_placeholder_seconds_sum", channel="websocket")
    turn_sum = value(samples, "gateway_turn_seconds_sum", **completed)
    assert placeholder_sum is not None and turn_sum is not None and 0 < placeholder_sum < turn_sum

    openai = {"provider": "openai", "model": "test-model"}
    anthropic = {"provider": "anthropic", "model": "backup-model"}
    assert value(samples, "gateway_model_calls_total", **openai, outcome="ok") == 2
    assert value(samples, "gateway_model_calls_total", **openai, outcome="unavailable") == 2
    assert value(samples, "gateway_model_calls_total", **anthropic, outcome="ok") == 1
    assert value(samples, "gateway_model_call_seconds_count", **openai) == 4
    assert value(samples, "gateway_model_first_token_seconds_count", **openai) == 2  # not failed
    assert value(samples, "gateway_model_first_token_seconds_count", **anthropic) == 1
    assert value(samples, "gateway_model_tokens_total", **openai, direction="in") == 24
    assert value(samples, "gateway_model_tokens_total", **openai, direction="out") == 14
    assert value(samples, "gateway_model_tokens_total", **anthropic, direction="in") == 20
    assert value(samples, "gateway_model_tokens_total", **anthropic, direction="out") == 4
    assert value(samples, "gateway_model_retries_total", **openai) == 1
    fell_back = {"from_provider": "openai", "to_provider": "anthropic"}
    assert value(samples, "gateway_model_fallbacks_total", **fell_back) == 1

    clock = {"tool": "get_current_datetime"}
    assert value(samples, "gateway_tool_calls_total", **clock, outcome="ok") == 1
    assert value(samples, "gateway_tool_call_seconds_count", **clock) == 1
    assert value(samples, "gateway_connections", channel="websocket") == 1
    assert value(samples, "gateway_specialists_running") == 0
    assert value(samples, "gateway_conversations_waiting") == 0
    # bounded labels: no visitor, chat or conversation id in any of them
    labels = {v for _, pairs in samples for _, v in pairs}
    assert not [v for v in labels if "visitor" in v or "secret" in v], labels


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotAPI]:
    api = FakeBotAPI(interval_s=0.2)
    await api.start()
    yield api
    await api.close()


async def test_telegram_calls_and_a_429_with_its_wait_are_counted(
    tmp_path: Path, fake: FakeBotAPI, session: aiohttp.ClientSession
) -> None:
    channel = {
        "enabled": True,
        "token": TOKEN,
        "api_base": fake.url,
        "private_edit_interval_s": 0.2,
        "group_edit_interval_s": 0.2,
    }
    config = make_config(tmp_path, channels={"telegram": channel})
    answer = " ".join(f"word{i}" for i in range(120))
    provider = ScriptedProvider([Scripted(answer, chunks=6, delay_s=0.1)])
    async with App(config, base_dir=tmp_path, provider=provider) as app:
        await fake.wait_for(lambda: any(c.method == "getupdates" for c in fake.calls))
        fake.push(fake.message(42, "hi"))
        await fake.wait_for(lambda: len(fake.ok(42, "sendMessage")) == 1)
        fake.force_429(42, retry_after=1)
        await provider.wait_requests(1)
        await app.gateway.wait_idle()
        samples = await scrape(session, app)
    [limited] = fake.rate_limited
    tg = {"channel": "telegram"}
    calls = {
        (labels["method"].lower(), labels["outcome"]): count
        for (name, pairs), count in samples.items()
        if name == "gateway_platform_calls_total"
        for labels in [dict(pairs)]
        if labels["channel"] == "telegram"
    }
    assert calls[(limited.method, "rate_limited")] == 1
    assert calls[("sendmessage", "ok")] == 1
    assert calls[("getme", "ok")] >= 1 and calls[("getupdates", "ok")] >= 1
    edits = len(fake.ok(42, "editMessageText"))
    assert calls[("editmessagetext", "ok")] == edits > 0
    assert value(samples, "gateway_platform_rate_limited_total", **tg) == 1
    assert value(samples, "gateway_platform_retry_wait_seconds_total", **tg) == 1.0
    assert value(samples, "gateway_turns_total", **tg, outcome="completed") == 1
    assert (
        value(
            samples,
            "gateway_model_calls_total",
            provider="scripted",
            model="scripted",
            outcome="ok",
        )
        == 1
    )


async def test_each_app_counts_its_own_and_metrics_can_be_off(
    running: Running, session: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (the two share a database: their messages need ids of their own)
    first = await running(ScriptedProvider([Scripted("one")]))
    second = await running(ScriptedProvider([Scripted("two")]))
    for n, app in enumerate((first, second)):
        client = await connect(session, app)
        await client.hello()
        await client.ask("hi", f"m{n}")
        await app.gateway.wait_idle()
        await client.ws.close()
    for app in (first, second):
        samples = await scrape(session, app)
        assert value(samples, "gateway_turns_total", channel="websocket", outcome="completed") == 1
        names = {name for name, _ in samples}
        assert not {name for name in names if name.endswith("_created")}  # no start-time series
        assert {"process_cpu_seconds_total", "process_resident_memory_bytes"} <= names
    monkeypatch.setenv("BOT_METRICS", "off")
    off = await running(ScriptedProvider([Scripted("three")]))
    client = await connect(session, off)
    await client.hello()
    assert (await client.ask("hi", "m3"))["text"] == "three"
    async with session.get(f"{off.url}/metrics") as response:
        assert response.status == 404


async def test_a_stopped_turn_counts_its_model_call_as_cancelled(
    running: Running, session: aiohttp.ClientSession
) -> None:
    async with FakeOpenAI() as llm:
        llm.add(Reply(text=[f"word{i} " for i in range(200)], delay_s=0.02))
        app = await running(llm=llm_config("openai", llm))
        client = await connect(session, app)
        await client.hello()
        await client.send(type="message", text="a long story", client_message_id="m1")
        await client.until(lambda f: f["type"] == "message.updated" and "word3" in f["text"])
        await client.send(type="stop")
        await client.until_type("message.completed")
        await app.gateway.wait_idle()
        samples = await scrape(session, app)
    call = {"provider": "openai", "model": "test-model"}
    assert value(samples, "gateway_model_calls_total", **call, outcome="cancelled") == 1
    assert value(samples, "gateway_model_calls_total", **call, outcome="ok") is None
    assert value(samples, "gateway_turns_total", channel="websocket", outcome="stopped") == 1
