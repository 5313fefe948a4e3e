"""Time-ordered turn ids (bot/storage/ids.py): UUIDs of version 7, the newer sorting last."""

from __future__ import annotations

import time
import uuid

import aiohttp

from agent.providers.scripted import Reply, ScriptedProvider
from bot.storage.ids import short_turn_id, time_ordered_id
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


async def test_turns_are_keyed_in_the_order_they_were_made_and_sessions_at_random(
    running: Running, session: aiohttp.ClientSession
) -> None:
    app = await running(ScriptedProvider([Reply("one"), Reply("two"), Reply("three")]))
    for n in range(3):
        tab = await connect(session, app)
        await tab.hello(f"visitor-{n:04d}")  # a session each
        await tab.ask(f"question {n}", f"c{n}")
        await app.gateway.wait_idle()
        await tab.ws.close()
    turns = [row[0] for row in db_rows(app, "SELECT id FROM turns ORDER BY rowid")]
    assert len(turns) == 3 and turns == sorted(turns)
    assert {uuid.UUID(made).version for made in turns} == {7}
    # an admin names a session by the start of its id (`bot sessions show 3f2a`): random
    sessions = [row[0] for row in db_rows(app, "SELECT id FROM chat_sessions")]
    assert len(sessions) == 3 and {uuid.UUID(made).version for made in sessions} == {4}


def test_a_turn_is_named_by_the_random_end_of_a_time_ordered_id() -> None:
    made = [time_ordered_id() for _ in range(50)]  # many in one millisecond
    names = {short_turn_id(turn_id) for turn_id in made}
    assert len(names) == 50 and all(len(name) == 12 for name in names)
    old = uuid.uuid4().hex  # as turns were keyed before: named as they were
    assert short_turn_id(old) == old[:12]
