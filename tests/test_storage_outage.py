"""Two defects the multi-process PostgreSQL outage test (tests/test_multiprocess_pg.py) found,
shown here in one process each (fixed; these tests keep them fixed).

1. A turn the outage cut short ends with STORAGE_FAILED in its placeholder; its `finish_turn`
   failed too, and the row stayed `running`. In embedded mode the next start resumed it as if
   the process had died (the model asked again, the placeholder that asked the user to send the
   message again answered after all): two answers. Now the end is retried until the store
   answers, and once more at shutdown (bot/pipeline/turn_ends.py).
2. In Redis mode the turn released its messages' claims "so a platform's retry is answered",
   but the queue's once-key (bot/redis/conversations_lua.py ENQUEUE, `q:once:<event>`, 10 min)
   still dropped the redelivery silently. Now the turn reopens them (`Dedup.reopen`: the claim
   and the once-key). tests/test_redis_retry.py shows it with a real platform client.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from adapters.base import ChannelLimits
from agent.providers.scripted import Reply, ScriptedProvider
from bot.pipeline.turn import STORAGE_FAILED
from bot.runtime.app import App
from tests.conftest import Running, eventually
from tests.fakes import RecordingChannel
from tests.pg_kit import CuttableLink, pg_database, pg_url
from tests.redis_kit import URL, prefix
from tests.test_store_pg_faults import _msg

__all__ = ["pg_database", "pg_url", "prefix"]


@pytest.fixture
async def link() -> AsyncIterator[CuttableLink]:
    async with CuttableLink() as made:
        yield made


def _channel() -> RecordingChannel:
    # no previews: the answer is not shown before its save fails, so the turn ends with
    # STORAGE_FAILED (an answer the user saw is kept: tests/test_storage_kept_answer.py)
    return RecordingChannel(
        ChannelLimits(max_text_length=4096, min_edit_interval_s=0.05, can_edit=False)
    )


async def _cut_mid_turn(
    running: Running, link: CuttableLink, pg_url: str, **sections: Any
) -> tuple[App, RecordingChannel, ScriptedProvider]:
    """A turn whose model call is under way when the database goes away; then it comes back."""
    channel = _channel()
    held = asyncio.Event()
    provider = ScriptedProvider([Reply("cut mid-turn", wait=held), Reply("answered")])
    app = await running(provider, channels=[channel], storage={"url": link.url(pg_url)}, **sections)
    await app.gateway.handle(_msg("a question", "e1"))
    await eventually(lambda: len(provider.requests) == 1)
    await link.cut()
    held.set()
    await app.gateway.wait_idle()
    assert channel.calls[-1].text == STORAGE_FAILED
    await link.restore()
    return app, channel, provider


async def test_a_turn_the_outage_cut_short_is_not_left_running(
    running: Running, link: CuttableLink, pg_url: str
) -> None:
    await _cut_mid_turn(running, link, pg_url)

    async def statuses() -> list[str]:
        conn = await asyncpg.connect(pg_url)
        try:
            return [r["status"] for r in await conn.fetch("select status from turns")]
        finally:
            await conn.close()

    async with asyncio.timeout(10):
        while await statuses() != ["failed"]:  # noqa: ASYNC110 (a row: polled)
            await asyncio.sleep(0.1)


async def test_in_redis_mode_the_retry_of_a_message_the_outage_lost_is_answered(
    prefix: str, running: Running, link: CuttableLink, pg_url: str
) -> None:  # `prefix` first: its keys are deleted after the app stopped
    app, channel, provider = await _cut_mid_turn(
        running, link, pg_url, redis={"url": URL, "prefix": prefix}
    )
    await app.gateway.handle(_msg("a question", "e1"))  # the platform delivers it again
    await app.gateway.wait_idle()
    assert channel.calls[-1].text == "answered"


async def test_the_next_start_does_not_answer_again_what_the_user_was_told_to_resend(
    running: Running, link: CuttableLink, pg_url: str
) -> None:
    first, _, _ = await _cut_mid_turn(running, link, pg_url)
    await first.stop()
    provider = ScriptedProvider([Reply("answered after the restart")])
    channel = _channel()
    again = await running(provider, channels=[channel], storage={"url": link.url(pg_url)})
    await again.gateway.wait_idle()
    assert provider.requests == [] and channel.calls == []  # the apology stands


async def test_a_turn_a_later_one_followed_is_not_resumed_though_its_end_was_lost(
    running: Running, link: CuttableLink, pg_url: str
) -> None:
    first, channel, _ = await _cut_mid_turn(running, link, pg_url)
    await first.gateway.handle(_msg("a question", "e2"))  # the user sends it again, as asked
    await first.gateway.wait_idle()
    assert channel.calls[-1].text == "answered"
    await first.stop()
    conn = await asyncpg.connect(pg_url)
    try:  # as a process killed before it wrote the first turn's end leaves it
        await conn.execute("update turns set status = 'running' where final_text is null")
        provider = ScriptedProvider([Reply("answered twice")])
        again = await running(provider, channels=[_channel()], storage={"url": link.url(pg_url)})
        await again.gateway.wait_idle()
        rows = await conn.fetch("select status, error from turns order by seq")
    finally:
        await conn.close()
    assert provider.requests == []  # not resumed: the resend was answered already
    assert [r["status"] for r in rows] == ["failed", "completed"]
    assert "a later turn of its conversation ran" in rows[0]["error"]


async def test_a_resumed_turn_the_outage_cut_short_is_not_left_running(
    running: Running, link: CuttableLink, pg_url: str
) -> None:
    first, _, _ = await _cut_mid_turn(running, link, pg_url)
    await first.stop()
    conn = await asyncpg.connect(pg_url)
    try:  # as a process killed mid-turn leaves it: resumed at the next start
        await conn.execute("update turns set status = 'running', error = null")
        held = asyncio.Event()
        provider = ScriptedProvider([Reply("resumed, then cut", wait=held)])
        channel = _channel()
        await running(provider, channels=[channel], storage={"url": link.url(pg_url)})
        await eventually(lambda: len(provider.requests) == 1)  # the resumed turn asks the model
        await link.cut()
        held.set()
        await eventually(lambda: bool(channel.calls) and channel.calls[-1].text == STORAGE_FAILED)
        await link.restore()
        await _until_statuses(conn, ["failed"])
    finally:
        await conn.close()


async def _until_statuses(conn: asyncpg.Connection, wanted: list[str]) -> None:
    """Until the turns' rows say `wanted` (recorded state, polled)."""
    async with asyncio.timeout(10):
        while await _statuses(conn) != wanted:  # noqa: ASYNC110 (a row: polled)
            await asyncio.sleep(0.1)


async def _statuses(conn: asyncpg.Connection) -> list[str]:
    return [r["status"] for r in await conn.fetch("select status from turns order by seq")]
