"""The checkpoint thread yields a busy core to the event loop.

A WAL checkpoint copies pages without the GIL, so when the gateway shares one core the scheduler
gave the checkpoint thread slices of the loop's time (passes of the loop 4-7 ms longer in a perf
trace, bench/loop_passes.py). It runs at a lower priority: Linux keeps one per thread.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path

import pytest

from agent.types import Message
from bot.storage import SqliteStore

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="a priority per thread is Linux's")


async def test_the_checkpoint_thread_runs_at_a_lower_priority_than_the_loop(
    tmp_path: Path,
) -> None:
    async with SqliteStore(tmp_path / "bot.db") as store:
        session_id = await store.active_session(
            channel="websocket", conversation_key="chat-1", user_id="user-1"
        )
        await store.append_messages(session_id, "t1", [Message("user", "hello")])
        store._request_checkpoint()
        assert store._checkpoint is not None
        await asyncio.wrap_future(store._checkpoint)
        (thread,) = [t for t in threading.enumerate() if t.name.startswith("sqlite-checkpoint")]
        assert thread.native_id is not None
        loop_nice = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        assert os.getpriority(os.PRIO_PROCESS, thread.native_id) == min(19, loop_nice + 10)
