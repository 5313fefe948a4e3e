"""The app in multi-process mode (`redis.url`), in this process: two apps on one Redis prefix and
one SQLite file serve one conversation together; with Redis down nothing is taken and each
channel says "later" the way its platform understands."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp

from agent.providers.scripted import Reply, ScriptedProvider
from bot.runtime.app import App
from tests.conftest import Running, connect, db_rows, make_config
from tests.redis_kit import URL, prefix
from tests.telegram_fake import TOKEN, FakeBotAPI

__all__ = ["prefix"]

SECRET = "s3cret-webhook"


async def test_two_processes_serve_one_conversation(
    prefix: str, running: Running, session: aiohttp.ClientSession
) -> None:
    redis = {"url": URL, "prefix": prefix, "lease_s": 4}
    first = await running(ScriptedProvider([Reply("from whichever ran it")]), redis=redis)
    second = await running(ScriptedProvider([Reply("from whichever ran it")]), redis=redis)
    on_first, on_second = await connect(session, first), await connect(session, second)
    await on_first.hello()
    await on_second.hello()  # the same visitor (the same conversation), another process
    await on_first.send(type="message", text="hello", client_message_id="c1")
    completed = [await c.until_type("message.completed") for c in (on_first, on_second)]
    assert completed[0] == completed[1] and completed[0]["text"] == "from whichever ran it"
    created = [f for f in on_first.frames if f["type"] == "message.created"]
    assert len(created) == 1 and created[0]["reply_to"] == "c1"
    await first.gateway.wait_idle()
    assert db_rows(first, "select status from turns") == [("completed",)]  # run once, shared file
    # A reconnect to the other process resumes by seq: only what came after.
    seq = created[0]["seq"]
    again = await connect(session, second)
    ready = await again.hello(resume_after=seq)
    assert ready["seq"] == completed[0]["seq"]
    await again.until_type("message.completed")
    replayed = [f["seq"] for f in again.frames if "seq" in f and f["type"] != "ready"]
    assert replayed and min(replayed) > seq and max(replayed) == completed[0]["seq"]


async def test_redis_down_nothing_is_taken_and_each_channel_says_later(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    fake = FakeBotAPI(interval_s=0.05)
    await fake.start()
    channel = {"enabled": True, "token": TOKEN, "api_base": fake.url, "mode": "webhook"}
    config = make_config(
        tmp_path,
        redis={"url": "redis://127.0.0.1:1/0"},  # nothing listens there
        server={"public_url": "https://bot.example.com"},
        channels={"telegram": channel | {"webhook_secret": SECRET}},
    )
    provider = ScriptedProvider([Reply("never")])
    try:
        async with App(config, base_dir=tmp_path, provider=provider) as app:
            async with session.get(f"{app.url}/healthz") as r:
                health: dict[str, Any] = await r.json()
                assert (r.status, health["status"], health["redis"]) == (503, "error", "down")
            await fake.wait_for(lambda: any(c.method == "setwebhook" for c in fake.calls))
            headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
            update = fake.message(42, "hello")
            async with session.post(
                f"{app.url}/telegram/webhook", json=update, headers=headers
            ) as r:
                assert r.status == 503  # Telegram delivers it again later
            client = await connect(session, app)
            await client.send(type="hello", visitor_id="visitor-0001")
            error = await client.until_type("error")
            assert (error["code"], error["retry_after_ms"]) == ("try_later", 2000)
            closed = await client.ws.receive()
            assert (closed.type, client.ws.close_code) == (aiohttp.WSMsgType.CLOSE, 1013)
            await asyncio.sleep(0.1)
            assert provider.requests == [] and fake.to_chat(42, "sendMessage") == []
    finally:
        await fake.close()


async def test_quotas_count_in_redis_for_every_process(
    prefix: str, running: Running, session: aiohttp.ClientSession
) -> None:
    redis = {"url": URL, "prefix": prefix, "lease_s": 4}
    quotas = {"per_user": {"turns_per_day": 1}}
    first = await running(ScriptedProvider([Reply("the one answer")]), redis=redis, quotas=quotas)
    second = await running(ScriptedProvider([Reply("never")]), redis=redis, quotas=quotas)
    on_first, on_second = await connect(session, first), await connect(session, second)
    await on_first.hello()
    await on_second.hello()
    await on_first.send(type="message", text="hello", client_message_id="c1")
    assert (await on_first.until_type("message.completed"))["text"] == "the one answer"
    await first.gateway.wait_idle()
    await on_second.send(type="message", text="again", client_message_id="c2")
    while (frame := await on_second.until_type("message.completed"))["text"] == "the one answer":
        pass  # the first turn, seen by this tab too
    assert "today's limit (1 message a day)" in frame["text"]
    from bot.redis.client import connect as redis_connect

    client = redis_connect(URL)
    try:
        counters = [key async for key in client.scan_iter(match=f"{prefix}quota:*")]
    finally:
        await client.aclose()
    assert len(counters) == 1  # the user's day: in Redis, not in the shared database
    assert db_rows(first, "select count(*) from quota_counters") == [(0,)]
