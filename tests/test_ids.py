"""Time-ordered row keys (bot/storage/ids.py): UUIDs of version 7, the newer sorting last."""

from __future__ import annotations

import time
import uuid

import aiohttp

from agent.providers.scripted import Reply, ScriptedProvider
from bot.storage.ids import time_ordered_id
from tests.conftest import Running, connect, db_rows


def test_an_id_is_a_version_7_uuid_as_32_hex_characters() -> None:
    made = time_ordered_id()
    parsed = uuid.UUID(made)
    assert (len(made), made, parsed.version, parsed.variant) == (
        32,
        made.lower(),
        7,
        uuid.RFC_4122,
    )
    assert abs(int(made[:12], 16) - time.time() * 1000) < 60_000  # its first 48 bits: now, in ms


def test_ids_of_later_milliseconds_sort_after_and_none_repeats() -> None:
    made = []
    for _ in range(5):
        made += [time_ordered_id() for _ in range(200)]
        time.sleep(0.002)
    assert len(set(made)) == len(made)
    stamps = [made_id[:12] for made_id in made]
    assert stamps == sorted(stamps)
    assert made[-1] > made[0]


async def test_turns_and_sessions_are_keyed_in_the_order_they_were_made(
    running: Running, session: aiohttp.ClientSession
) -> None:
    app = await running(ScriptedProvider([Reply("one"), Reply("two"), Reply("three")]))
    for n in range(3):
        tab = await connect(session, app)
        await tab.hello(f"visitor-{n:04d}")  # a session each
        await tab.ask(f"question {n}", f"c{n}")
        await app.gateway.wait_idle()
        await tab.ws.close()
    for table in ("turns", "chat_sessions"):
        ids = [row[0] for row in db_rows(app, f"SELECT id FROM {table} ORDER BY rowid")]  # noqa: S608
        assert len(ids) == 3 and ids == sorted(ids), table
        assert {uuid.UUID(made).version for made in ids} == {7}
