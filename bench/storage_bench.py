"""Per-turn storage cost of SqliteStore: turns/s and event-loop CPU per turn (CLI benchmark).

Loop CPU per turn moves by ±20 % between runs on a shared machine; `--instructions` counts
instead, with valgrind's callgrind, the instructions of the measured turns only (one
conversation, with history), and `--tree DIR` measures another checkout's store with this
script's turn, so a change and its base are compared in one sitting:

    python bench/storage_bench.py [--turns 2000]
    python bench/storage_bench.py --instructions [--turns 200] [--tree DIR] [--alone]

`--alone` counts the store as `bot serve` without Redis uses it (`write_alone`: the only writer
of its sessions, which reads no cached history back).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import inspect
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if "--tree" in sys.argv:  # another checkout's store (see the docstring)
    sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--tree") + 1]).resolve()))
sys.path.insert(0 if "--tree" not in sys.argv else 1, str(ROOT))  # runnable from a checkout

from agent.types import Message  # noqa: E402
from bot.storage import SqliteStore  # noqa: E402

log = logging.getLogger(__name__)
OLD_TURNS = "messages" not in inspect.signature(SqliteStore.create_turn).parameters


async def one_turn(store: SqliteStore, conversation: str, n: int, with_history: bool) -> None:
    session_id = await store.active_session(
        channel="websocket", conversation_key=conversation, user_id="user-1"
    )
    turn_id = uuid.uuid4().hex
    # as the gateway records a turn: with the user's message, before the model runs, then
    # each step as it happens (so a turn cut short by a crash can be resumed)
    question = Message("user", f"question number {n}, asked by a user")
    turn: dict[str, Any] = {
        "turn_id": turn_id,
        "session_id": session_id,
        "channel": "websocket",
        "conversation_key": conversation,
        "inbound_event_ids": [f"evt-{n}"],
        "placeholder": {"chat": {"chat_id": conversation}, "message_id": str(n), "data": {}},
    }
    if OLD_TURNS:  # a checkout from before turns were written with their first message
        await store.create_turn(**turn)
        await store.append_messages(session_id, turn_id, [question])
    else:
        await store.create_turn(**turn, messages=[question])
    if with_history:
        await store.load_history(session_id)
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


async def count(path: Path, turns: int, alone: bool) -> None:
    """The child of `instructions`: warm up, then `turns` turns with callgrind counting."""
    async with SqliteStore(path) as store:
        if alone:
            store.write_alone()
        for n in range(50):
            await one_turn(store, "conv", n, with_history=True)
        # as a serving gateway settles its heap (bot.runtime.heap): start-up objects frozen, so
        # a collection that falls inside the count walks only what the turns made
        gc.collect()
        gc.freeze()
        toggle = ["callgrind_control", "--instr=on", str(os.getpid())]
        subprocess.run(toggle, stdout=subprocess.DEVNULL, check=True)  # noqa: ASYNC221
        for n in range(50, 50 + turns):
            await one_turn(store, "conv", n, with_history=True)
        toggle[1] = "--instr=off"
        subprocess.run(toggle, stdout=subprocess.DEVNULL, check=True)  # noqa: ASYNC221


def instructions(tree: Path, turns: int, alone: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        child = subprocess.run(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no",
             "--callgrind-out-file=/dev/null", sys.executable, __file__, "--count",
             str(Path(tmp) / "bench.db"), "--turns", str(turns), "--tree", str(tree),
             *(["--alone"] if alone else [])],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
    counted = re.search(r"Collected : (\d+)", child.stderr)
    if child.returncode or counted is None:
        raise SystemExit(f"callgrind run failed: {child.stderr[-3000:]}")
    thousands = int(counted.group(1)) / turns / 1e3
    how = "written alone" if alone else "1 conversation"
    print(f"{tree.name:16} store, {how} + load_history: {thousands:,.0f} k instructions/turn")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--dir", type=Path, help="where the database files go (default: temporary)")
    parser.add_argument("--instructions", action="store_true", help="callgrind counts per turn")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose store to count")
    parser.add_argument("--alone", action="store_true", help="as bot serve without Redis")
    parser.add_argument("--count", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.count:
        asyncio.run(count(args.count, args.turns, args.alone))
        return
    if args.instructions:
        instructions(args.tree.resolve(), args.turns, args.alone)
        return
    with tempfile.TemporaryDirectory() as tmp:
        directory = args.dir or Path(tmp)
        for conversations, with_history in ((1, False), (1, True), (50, True)):
            path = directory / f"bench-{conversations}-{with_history}.db"
            path.unlink(missing_ok=True)
            asyncio.run(run(path, args.turns, conversations, with_history))


if __name__ == "__main__":
    main()
