"""PostgreSQL unreachable mid-run: calls fail with StorageError within their deadline, nothing
crashes, /healthz names the storage, and all is well again when the server is back.

The shared server is never stopped: the store talks to it through `CuttableLink`, a TCP proxy
these tests cut (every connection reset, new ones refused) or silence (bytes held back).
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from adapters.base import ChannelLimits, ChatRef, InboundMessage
from agent.providers.scripted import Reply, ScriptedProvider
from agent.types import Message
from bot.pipeline.gateway import NOT_TAKEN
from bot.pipeline.turn import STORAGE_FAILED
from bot.storage import StorageError
from bot.storage.pg import PostgresStore
from tests.conftest import Running, eventually
from tests.fakes import RecordingChannel
from tests.pg_kit import CuttableLink, pg_database, pg_url

__all__ = ["pg_database", "pg_url"]
SESSION = {"channel": "fake", "conversation_key": "fake:dm-u1", "user_id": "u1"}


def _msg(text: str, event: str) -> InboundMessage:
    return InboundMessage(ChatRef("fake", "dm-u1"), "u1", text, event, f"msg-{event}")


async def test_a_cut_link_fails_calls_then_the_store_recovers(pg_url: str) -> None:
    async with CuttableLink() as link, PostgresStore(link.url(pg_url)) as store:
        session_id = await store.active_session(**SESSION)
        await store.append_messages(session_id, "t1", [Message("user", "before")])
        await link.cut()
        started = time.monotonic()
        for call in (
            store.claim_event("e1", 60),
            store.append_messages(session_id, "t2", [Message("user", "lost")]),
            store.load_history(session_id),
        ):
            with pytest.raises(StorageError, match=r"127\.0\.0\.1"):
                await call
        assert time.monotonic() - started < 2  # refused at once: nobody waits on a dead link
        assert store.trouble is not None
        await link.restore()
        assert await store.claim_event("e1", 60)  # the failed claim took nothing
        assert store.trouble is None
        await store.append_messages(session_id, "t3", [Message("user", "after")])
        assert [m.content for _, m in await store.load_history(session_id)] == ["before", "after"]


async def test_a_silent_link_fails_the_call_at_its_deadline(pg_url: str) -> None:
    async with CuttableLink() as link:
        async with PostgresStore(link.url(pg_url), call_timeout_s=0.5) as store:
            await store.claim_event("warm", 60)
            link.flowing.clear()  # a half-open link: the server's answers never come
            started = time.monotonic()
            with pytest.raises(StorageError, match="no answer in time"):
                await store.claim_event("e1", 60)
            assert 0.4 < time.monotonic() - started < 2
            link.flowing.set()
            assert await store.claim_event("e2", 60)


async def test_a_cancelled_caller_still_gets_its_write(pg_url: str) -> None:
    async with PostgresStore(pg_url) as store:
        session_id = await store.active_session(**SESSION)
        task = asyncio.create_task(store.append_messages(session_id, "t", [Message("user", "hi")]))
        await asyncio.sleep(0.001)  # the write is on the wire when its caller goes away
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    async with PostgresStore(pg_url) as reopened:
        assert await reopened.load_history(session_id) == [("t", Message("user", "hi"))]


async def _health(session: aiohttp.ClientSession, url: str) -> tuple[int, dict[str, str]]:
    async with session.get(f"{url}/healthz") as response:
        return response.status, await response.json()


async def test_the_gateway_rides_out_the_database_going_away(
    pg_url: str, running: Running, session: aiohttp.ClientSession
) -> None:
    """No crash, the user told what happened, /healthz says storage; when the server is back, the
    platform's redelivery is answered once."""
    link = CuttableLink()
    await link.restore()
    # no previews: "cut mid-turn" is not shown before its save fails (one shown is kept:
    # tests/test_storage_kept_answer.py), so the turn ends with STORAGE_FAILED
    limits = ChannelLimits(max_text_length=4096, min_edit_interval_s=0.05, can_edit=False)
    channel = RecordingChannel(limits)
    held = asyncio.Event()
    provider = ScriptedProvider([Reply("first"), Reply("cut mid-turn", wait=held), Reply("back")])
    app = await running(provider, channels=[channel], storage={"url": link.url(pg_url)})
    try:
        await app.gateway.handle(_msg("hello", "e0"))
        await app.gateway.wait_idle()
        assert channel.calls[-1].text == "first"

        await app.gateway.handle(_msg("a question", "e1"))  # its turn waits for the model
        await eventually(lambda: len(provider.requests) == 2)  # the placeholder is out
        await link.cut()
        held.set()
        await app.gateway.wait_idle()
        assert channel.calls[-1].text == STORAGE_FAILED and channel.calls[-1].final

        await app.gateway.handle(_msg("anyone?", "e2"))  # cannot even be claimed
        assert channel.calls[-1].text == NOT_TAKEN
        status, body = await _health(session, app.url)
        assert status == 503 and "storage" in body

        await link.restore()
        await app.gateway.handle(_msg("anyone?", "e2"))  # the platform delivers it again
        await app.gateway.wait_idle()
        assert channel.calls[-1].text == "back"
        assert [c.text for c in channel.calls].count("back") == 1
        status, body = await _health(session, app.url)
        assert status == 200 and "storage" not in body, body
    finally:
        await app.stop()
        await link.cut()
