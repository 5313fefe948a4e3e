"""Per-turn storage cost of SqliteStore: turns/s and event-loop CPU per turn (CLI benchmark)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # runnable from a checkout

from agent.types import Message
from bot.storage import SqliteStore

log = logging.getLogger(__name__)


async def one_turn(store: SqliteStore, conversation: str, n: int, with_history: bool) -> None:
    session_id = await store.active_session(
        channel="websocket", conversation_key=conversation, user_id="user-1"
    )
    turn_id = uuid.uuid4().hex
    await store.create_turn(
        turn_id=turn_id,
        session_id=session_id,
        channel="websocket",
        conversation_key=conversation,
        inbound_event_ids=[f"evt-{n}"],
        placeholder={"chat": {"chat_id": conversation}, "message_id": str(n), "data": {}},
    )
    if with_history:
        await store.load_history(session_id)
    # as the coordinator records them: the user's message before the model runs, each step
    # as it happens (so a turn cut short by a crash can be resumed)
    question = Message("user", f"question number {n}, asked by a user")
    await store.append_messages(session_id, turn_id, [question])
    answer = Message("assistant", f"answer number {n}, from the scripted model " + "x" * 200)
    await store.append_messages(session_id, turn_id, [answer])
    await store.finish_turn(turn_id, status="completed", final_text=f"answer {n}")


async def run(path: Path, turns: int, conversations: int, with_history: bool) -> None:
    async with SqliteStore(path) as store:
        for n in range(50):  # warm up: statement cache, page cache, the executor thread
            await one_turn(store, "warmup", n, with_history)
        # the floor: one minimal store call (an index probe that finds nothing), for scale
        cpu = time.thread_time()
        for _ in range(1000):
            await store.get_turn("missing")
        floor = (time.thread_time() - cpu) / 1000
        per_conv = turns // conversations
        tenth = max(per_conv // 10, 1)
        edges: list[float] = []  # loop CPU over the first and the last tenth of conversation 0

        async def conversation(c: int) -> None:
            for n in range(per_conv):
                if c == 0 and n in (0, tenth, per_conv - tenth):
                    edges.append(time.thread_time())
                await one_turn(store, f"conv-{c}", n, with_history)
            if c == 0:
                edges.append(time.thread_time())

        wall, cpu, proc = time.perf_counter(), time.thread_time(), time.process_time()
        async with asyncio.TaskGroup() as group:
            for c in range(conversations):
                group.create_task(conversation(c))
        cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
        other_cpu = time.process_time() - proc - cpu  # other threads (the WAL checkpointer)
        done = per_conv * conversations
        history = " + load_history" if with_history else ""
        print(
            f"{done} turns, {conversations} conversation(s){history}: {done / wall:,.0f} turns/s;"
            f" per turn: loop-thread CPU {cpu / done * 1e6:,.0f} us,"
            f" other threads CPU {other_cpu / done * 1e6:,.0f} us, wall {wall / done * 1e6:,.0f} us"
        )
        if conversations == 1:
            first, last = (edges[1] - edges[0]) / tenth, (edges[3] - edges[2]) / tenth
            print(
                f"  flat? loop CPU per turn over the first {tenth} turns {first * 1e6:,.0f} us,"
                f" over the last {tenth} (history {2 * per_conv} messages) {last * 1e6:,.0f} us"
            )
        print(f"  scale: one minimal store call costs the loop {floor * 1e6:,.0f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--dir", type=Path, help="where the database files go (default: temporary)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = args.dir or Path(tmp)
        for conversations, with_history in ((1, False), (1, True), (50, True)):
            path = directory / f"bench-{conversations}-{with_history}.db"
            path.unlink(missing_ok=True)
            asyncio.run(run(path, args.turns, conversations, with_history))


if __name__ == "__main__":
    main()
