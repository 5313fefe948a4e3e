"""`/readyz`: 503 naming what is down and since when, 200 again when it is back: the model (a
fake OpenAI server through the real SDK), storage made read-only, a channel, a plugged-in check."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest

from agent.providers.scripted import Reply as Scripted
from agent.providers.scripted import ScriptedProvider
from bot.ops import readiness as readiness_module
from bot.ops.readiness import Down, Readiness
from bot.runtime.app import App
from bot.storage import SqliteStore
from tests.conftest import connect, make_config
from tests.fake_llm import Reply, fail, llm_config
from tests.fake_openai import FakeOpenAI
from tests.pg_kit import pg_database, pg_url
from tests.telegram_fake import FakeBotAPI

Start = Callable[..., Awaitable[App]]
__all__ = ["pg_database", "pg_url"]  # fixtures


@pytest.fixture
async def start(tmp_path: Path) -> AsyncIterator[Start]:
    """An app whose channels count as started at once (not after 5 s of running)."""
    apps: list[App] = []

    async def start(provider: Any = None, **sections: Any) -> App:
        app = App(make_config(tmp_path, **sections), base_dir=tmp_path, provider=provider)
        app.channel_states.settle_s = 0.0
        await app.__aenter__()
        apps.append(app)
        return app

    yield start
    for app in apps:
        await app.stop()


async def readyz(session: aiohttp.ClientSession, app: App) -> tuple[int, dict[str, Any]]:
    async with session.get(f"{app.url}/readyz") as response:
        return response.status, await response.json()


async def test_the_model_going_down_and_coming_back(
    start: Start, session: aiohttp.ClientSession
) -> None:
    async with FakeOpenAI() as llm:
        app = await start(llm=llm_config("openai", llm, max_retries=0))
        assert await readyz(session, app) == (200, {"status": "ready"})  # no call failed yet
        client = await connect(session, app)
        await client.hello()
        llm.add(fail(503, "server_error", "the model is overloaded"))
        await client.ask("one", "m1")
        status, body = await readyz(session, app)
        assert status == 503 and list(body["down"]) == ["model"]
        down = body["down"]["model"]
        assert "openai/test-model" in down["reason"] and "503" in down["reason"]
        assert datetime.fromisoformat(down["since"]) <= datetime.now(UTC)
        assert "test-key" not in str(body)
        llm.add(Reply(text=["back"]))
        assert (await client.ask("two", "m2"))["text"] == "back"
        assert await readyz(session, app) == (200, {"status": "ready"})


async def test_a_failure_long_ago_is_not_down_and_a_refusal_is_not_down(
    start: Start, session: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeOpenAI() as llm:
        app = await start(llm=llm_config("openai", llm, max_retries=0))
        client = await connect(session, app)
        await client.hello()
        llm.add(fail(400, "invalid_request_error", "bad request"))
        await client.ask("one", "m1")
        assert (await readyz(session, app))[0] == 200  # the request's fault, not the model's
        llm.add(fail(503, "server_error"))
        await client.ask("two", "m2")
        assert (await readyz(session, app))[0] == 503
        monkeypatch.setattr(app.ops.model, "down_s", 0.0)  # that failure is old news now
        assert (await readyz(session, app))[0] == 200


async def test_storage_made_read_only_and_writable_again(
    start: Start, session: aiohttp.ClientSession
) -> None:
    app = await start(ScriptedProvider([]))
    assert (await readyz(session, app))[0] == 200
    assert isinstance(app.store, SqliteStore), "the read-only switch is SQLite's"
    app.store._conn.execute("PRAGMA query_only = ON")  # what a read-only file does to writes
    status, body = await readyz(session, app)
    assert status == 503 and list(body["down"]) == ["storage"]
    assert "readonly" in body["down"]["storage"]["reason"]
    since = body["down"]["storage"]["since"]
    await asyncio.sleep(1.1)
    assert (await readyz(session, app))[1]["down"]["storage"]["since"] == since  # kept
    app.store._conn.execute("PRAGMA query_only = OFF")
    assert await readyz(session, app) == (200, {"status": "ready"})


async def test_a_flood_of_readiness_requests_is_not_a_flood_of_writes(
    start: Start, session: aiohttp.ClientSession, pg_url: str
) -> None:
    # /readyz needs no credentials; on PostgreSQL each probe holds a pooled connection, so
    # a flood of probes would starve the turns of the pool.
    app = await start(ScriptedProvider([]), storage={"url": pg_url})
    count = await asyncpg.connect(pg_url)
    try:
        await count.execute(  # the database counts the probes' writes itself
            "CREATE TABLE probe_writes (n int);"
            " CREATE FUNCTION count_probe() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN INSERT INTO probe_writes VALUES (1); RETURN NEW; END $$;"
            " CREATE TRIGGER count_probes AFTER INSERT ON event_claims FOR EACH ROW"
            " WHEN (NEW.event_id LIKE 'readyz:%') EXECUTE FUNCTION count_probe();"
        )
        answers = await asyncio.gather(*(readyz(session, app) for _ in range(40)))
        assert all(answer == (200, {"status": "ready"}) for answer in answers)
        writes = await count.fetchval("SELECT count(*) FROM probe_writes")
    finally:
        await count.close()
    assert 1 <= writes < 20  # each write answers every request that waited for it


async def test_a_channel_that_cannot_start_is_named(
    tmp_path: Path, session: aiohttp.ClientSession, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeBotAPI()
    await fake.start()
    telegram = {"enabled": True, "token": "999:REVOKED", "api_base": fake.url}
    config = make_config(tmp_path, channels={"telegram": telegram})
    app = App(config, base_dir=tmp_path, provider=ScriptedProvider([]))
    app.channel_states.settle_s = 0.2
    caplog.set_level(logging.INFO, logger="bot.ops.operations")
    try:
        async with app:
            for _ in range(500):  # until the web socket has settled and telegram has failed
                status, body = await readyz(session, app)
                if set(body.get("down", ())) == {"channel:telegram"}:
                    break
                await asyncio.sleep(0.01)
            assert status == 503 and set(body["down"]) == {"channel:telegram"}
            assert "401 Unauthorized" in body["down"]["channel:telegram"]["reason"]
            # `bot serve` says the same in its log once the channels had time to start
            for _ in range(300):
                if any("not ready" in r.getMessage() for r in caplog.records):
                    break
                await asyncio.sleep(0.01)
    finally:
        await fake.close()
    [line] = [r.getMessage() for r in caplog.records if "not ready" in r.getMessage()]
    assert line.startswith("not ready: channel:telegram: failed: ") and "since" in line


async def test_a_dependency_plugs_in_and_a_hanging_check_is_down(
    start: Start, session: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    redis_up = asyncio.Event()

    async def redis() -> Down | None:
        return None if redis_up.is_set() else Down("redis://:pw@127.0.0.1:6390 refused")

    async def hangs() -> Down | None:
        await asyncio.Event().wait()
        return None

    app = await start(ScriptedProvider([Scripted("hi")]))
    app.readiness.add("redis", redis)
    status, body = await readyz(session, app)
    assert status == 503 and body["down"]["redis"]["reason"] == "redis://***@127.0.0.1:6390 refused"
    redis_up.set()
    assert (await readyz(session, app))[0] == 200
    monkeypatch.setattr(readiness_module, "CHECK_TIMEOUT_S", 0.05)
    app.readiness.add("slow", hangs)
    status, body = await readyz(session, app)
    assert status == 503 and body["down"]["slow"]["reason"] == "no answer within 0.05 s"
    with pytest.raises(ValueError, match="redis"):
        app.readiness.add("redis", redis)


async def test_an_offline_model_is_always_ready() -> None:
    readiness = Readiness()
    assert await readiness.report() == (True, {"status": "ready"})
