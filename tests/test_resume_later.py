"""A turn left unfinished (its process died) whose resumption the store refused (here another
process holds SQLite's write lock; a disk still full at start refuses the same way): it is tried
again once the store answers, in this process, and ends in its own placeholder; not only at the
next restart.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from agent.providers.scripted import Reply, ScriptedProvider
from tests.conftest import Running, eventually
from tests.fakes import RecordingChannel
from tests.test_storage_faults import LIMITS, _msg, locked_by_another_process, sqlite


async def test_a_resume_the_store_refused_is_retried_when_it_answers_again(
    running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    channel = RecordingChannel(LIMITS)
    provider = ScriptedProvider([Reply("the answer")])
    app = await running(provider, channels=[channel])
    message = _msg("a question", "e1")
    await app.gateway.handle(message)
    await app.gateway.wait_idle()
    store = sqlite(app)

    def statuses() -> list[tuple[str, int]]:
        with sqlite3.connect(store.path) as db:
            return db.execute("select status, resume_attempts from turns").fetchall()

    with sqlite3.connect(store.path) as db:  # as a process killed mid-turn leaves it
        [(turn_id,)] = db.execute("select id from turns").fetchall()
        db.execute("update turns set status = 'running', final_text = null")
    caplog.set_level(logging.ERROR)
    with locked_by_another_process(Path(store.path), None) as release:
        await app.gateway.queue_resume(str(turn_id), message.chat)
        await eventually(lambda: "cannot be resumed now" in caplog.text, 60)
        assert statuses() == [("running", 0)]
        release.set()
    # no restart: the refused resumption is tried again, and the turn ends in its placeholder
    await eventually(lambda: statuses() == [("completed", 1)], 60)
    finals = [c for c in channel.calls if c.final]
    assert [c.text for c in finals] == ["the answer", "the answer"]  # ended, then resumed
    assert {c.message_id for c in channel.calls} == {channel.calls[0].message_id}
    assert len(provider.requests) == 1  # its answer was recorded: replayed, not asked again
