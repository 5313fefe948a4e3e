"""PostgreSQL hanging while a turn saves the answer the user already sees (streamed into the
placeholder): the answer stays, never replaced by "couldn't save… send again"; its save and the
turn's end are retried, and land once the database answers again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from adapters.base import ChannelLimits
from agent.providers.scripted import Reply, ScriptedProvider
from bot.pipeline.turn import STORAGE_FAILED
from tests.conftest import Running, eventually
from tests.fakes import RecordingChannel
from tests.pg_kit import CuttableLink, pg_database, pg_url
from tests.test_store_pg_faults import _msg

__all__ = ["pg_database", "pg_url"]
ANSWER = "Here is the whole answer, streamed."


@pytest.fixture
async def link() -> AsyncIterator[CuttableLink]:
    async with CuttableLink() as made:
        yield made


async def _rows(url: str, sql: str) -> list[tuple[object, ...]]:
    conn = await asyncpg.connect(url)
    try:
        return [tuple(r) for r in await conn.fetch(sql)]
    finally:
        await conn.close()


async def test_an_answer_shown_before_the_database_hung_is_kept_and_saved_later(
    running: Running, link: CuttableLink, pg_url: str
) -> None:
    channel = RecordingChannel(ChannelLimits(max_text_length=4096, min_edit_interval_s=0.01))
    held = asyncio.Event()
    provider = ScriptedProvider([Reply(ANSWER, wait=held)])
    app = await running(provider, channels=[channel], storage={"url": link.url(pg_url)})
    await app.gateway.handle(_msg("a question", "e1"))
    await eventually(lambda: len(provider.requests) == 1)
    link.flowing.clear()  # the database hangs: the answer's save waits on it
    held.set()
    # the user sees the whole answer (a preview), while its save hangs
    await eventually(lambda: any(c.text == ANSWER and not c.final for c in channel.calls), 30)
    await link.cut()  # the hanging save fails
    await app.gateway.wait_idle()
    texts = [c.text for c in channel.calls]
    assert STORAGE_FAILED not in texts, texts
    assert channel.calls[-1].text == ANSWER  # the answer stays (unchanged: not edited again)
    link.flowing.set()
    await link.restore()
    async with asyncio.timeout(30):  # retried in the background until the database answers
        while await _rows(pg_url, "select status, final_text from turns") != [  # noqa: ASYNC110
            ("completed", ANSWER)
        ]:
            await asyncio.sleep(0.1)  # a row: polled
    saved = await _rows(pg_url, "select role, content from messages order by id")
    assert saved[-1] == ("assistant", ANSWER)
    assert [row for row in saved if row == ("assistant", ANSWER)] == [("assistant", ANSWER)]
