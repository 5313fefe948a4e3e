"""`RedisConversations` across processes: each message once, in order, one turn at a time per
conversation; /stop from another process; a dead holder's work taken over (XAUTOCLAIM).

Each "process" is a queue with its own Redis connections, as separate gateway processes have.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager

import pytest

from adapters.base import ChatRef, InboundMessage
from bot.pipeline.conversations import QueueFull, RunTurn, TurnSignal
from bot.redis import messages
from bot.redis.client import connect
from bot.redis.conversations import RedisConversations
from bot.redis.conversations_lua import GROUP
from bot.redis.dedup import RedisDedup
from tests.redis_kit import URL, redis_prefix


def msg(chat: str, text: str) -> InboundMessage:
    return InboundMessage(ChatRef("fake", chat), "u", text, f"e:{chat}:{text}")


@asynccontextmanager
async def three_processes(
    task_stopped: Callable[[int], Callable[[str, str], object]] = lambda n: lambda c, task: None,
) -> AsyncIterator[list[RedisConversations]]:
    """Three queues on one key prefix (the nth hears TaskStops with `task_stopped(n)`); `run`
    them yourself."""
    async with redis_prefix() as (_, prefix), AsyncExitStack() as stack:
        queues = []
        for n in range(3):
            redis, reader = connect(URL), connect(URL, reader=True)
            stack.push_async_callback(redis.aclose)
            stack.push_async_callback(reader.aclose)
            queues.append(
                RedisConversations(
                    redis, reader, prefix=prefix, lease_s=1, task_stopped=task_stopped(n)
                )
            )
        yield queues


@asynccontextmanager
async def running(
    processes: list[RedisConversations], runner: Callable[[int], RunTurn]
) -> AsyncIterator[None]:
    """Inside the block each process takes turns with `runner(n)`; stopped at its end."""
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(q.run(runner(n))) for n, q in enumerate(processes)]
        for q in processes:
            await q.started.wait()
        yield
        for task in tasks:
            task.cancel()


@pytest.fixture
async def processes() -> AsyncIterator[list[RedisConversations]]:
    async with three_processes() as queues:
        yield queues


async def test_three_processes_run_each_message_once_in_order(
    processes: list[RedisConversations],
) -> None:
    ran: dict[str, list[str]] = defaultdict(list)
    running: dict[str, int] = defaultdict(int)
    overlap: list[str] = []
    where: set[int] = set()

    def runner(n: int):  # type: ignore[no-untyped-def]
        async def run(batch: list[InboundMessage], signal: TurnSignal) -> None:
            chat = batch[0].chat.chat_id
            running[chat] += 1
            if running[chat] > 1:
                overlap.append(chat)
            where.add(n)
            await asyncio.sleep(0.002)
            ran[chat].extend(m.text for m in batch)
            running[chat] -= 1

        return run

    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(q.run(runner(n))) for n, q in enumerate(processes)]
        for q in processes:
            await q.started.wait()
        for i in range(20):
            for chat in "abcdef":
                await processes[(i + ord(chat)) % 3].enqueue(msg(chat, f"{i}"))
        async with asyncio.timeout(30):
            await processes[0].wait_idle()
        for task in tasks:
            task.cancel()
    assert overlap == []
    assert {chat: texts for chat, texts in ran.items()} == {
        chat: [str(i) for i in range(20)] for chat in "abcdef"
    }
    assert len(where) > 1  # the work was shared


async def test_stop_from_another_process_stops_the_turn(
    processes: list[RedisConversations],
) -> None:
    started: asyncio.Queue[int] = asyncio.Queue()
    stopped: list[str] = []

    def runner(n: int):  # type: ignore[no-untyped-def]
        async def run(batch: list[InboundMessage], signal: TurnSignal) -> None:
            signal.work = asyncio.current_task()
            await started.put(n)
            try:
                await asyncio.Future()
            except asyncio.CancelledError:
                stopped.append(batch[0].text)
                asyncio.current_task().uncancel()  # type: ignore[union-attr]

        return run

    async with running(processes, runner):
        await processes[0].enqueue(msg("a", "long"))
        async with asyncio.timeout(10):
            runs_on = await started.get()
            await processes[runs_on].enqueue(msg("a", "queued"))
            result = await processes[(runs_on + 1) % 3].stop("fake:a")  # asked elsewhere
            await processes[0].wait_idle()
    assert (result.dropped, result.running) == (1, True)
    assert stopped == ["long"]


async def test_a_dead_holders_turn_and_queue_are_taken_over(
    processes: list[RedisConversations],
) -> None:
    """What a process killed mid-turn leaves: its lease (expiring), the batch it was running,
    more queued behind it, and its stream entry pending. A live process finishes all of it."""
    live = processes[0]
    c = "fake:a"
    redis = live.redis
    await redis.xgroup_create(live.ready, GROUP, id="0", mkstream=True)
    await redis.xadd(live.ready, {"c": c})
    await redis.xreadgroup(GROUP, "dead-process", {live.ready: ">"}, count=1)
    await redis.set(live.key(c, "lock"), "7", px=500)
    await redis.set(live.key(c, "fence"), "7")
    await redis.set(live.key(c, "turn"), json.dumps([messages.dump(msg("a", "half done"))]))
    await redis.rpush(live.key(c, "in"), messages.dump(msg("a", "next")))
    await redis.zadd(f"{live.base}busy", {c: 0})
    turns: list[tuple[list[str], bool]] = []

    async def run(batch: list[InboundMessage], signal: TurnSignal) -> None:
        turns.append(([m.text for m in batch], signal.resumed))

    async with asyncio.TaskGroup() as group:
        task = group.create_task(live.run(run))
        async with asyncio.timeout(15):
            await live.started.wait()
            await live.wait_idle()
        task.cancel()
    assert turns == [(["half done"], True), (["next"], False)]
    assert int(await redis.get(live.key(c, "fence")) or 0) > 7  # newer tokens than the dead one's
    assert (await redis.xpending(live.ready, GROUP))["pending"] == 0


async def test_a_released_lease_stays_released(processes: list[RedisConversations]) -> None:
    """A heartbeat still in flight when its holder lets go must not take the lock back: a
    message queued meanwhile would find the lock held, and nobody would drain it."""
    q = processes[0]
    c = "fake:a"
    await q.redis.xgroup_create(q.ready, GROUP, id="0", mkstream=True)
    keys = {part: q.key(c, part) for part in ("lock", "fence", "in", "turn", "stop")}
    claim = await q.scripts["CLAIM"](keys=q.claim_keys(c), args=q.claim_args(c, "0-1", "wait"))
    token = int(claim[0])
    await q.redis.pexpire(keys["lock"], 1)
    await asyncio.sleep(0.01)  # the lease lapsed (a Redis outage, a stall): still ours to extend
    extend = [keys["lock"], keys["fence"], keys["stop"], q.ready]
    beat: list[str | int] = [token, 5000, "0-1", GROUP, q.consumer]
    assert await q.extends.send(c, extend, beat) == [1]
    let_go = await q.scripts["NEXT"](keys=q.claim_keys(c), args=q.claim_args(c, "0-1", "", token))
    assert let_go == [1]  # nothing queued: let go
    assert await q.extends.send(c, extend, beat) == [0]
    assert not await q.redis.exists(keys["lock"])


async def test_task_stop_reaches_every_process() -> None:
    """TaskStop asked on one process reaches the process whose specialist it names."""
    heard: asyncio.Queue[tuple[int, str, str]] = asyncio.Queue()

    def hook(n: int) -> Callable[[str, str], None]:
        return lambda c, task: heard.put_nowait((n, c, task))

    async def run(batch: list[InboundMessage], signal: TurnSignal) -> None:
        pass

    async with three_processes(hook) as processes, asyncio.TaskGroup() as group:
        tasks = [group.create_task(q.run(run)) for q in processes]
        for q in processes:
            await q.started.wait()
        got: set[tuple[int, str, str]] = set()
        async with asyncio.timeout(10):
            while {n for n, _, _ in got} != {0, 1, 2}:  # each listener subscribes as it starts
                await processes[0].stop_task("fake:a", "task-7")
                got.add(await heard.get())
                await asyncio.sleep(0.05)
                while not heard.empty():
                    got.add(heard.get_nowait())
        for task in tasks:
            task.cancel()
    assert {(c, task) for _, c, task in got} == {("fake:a", "task-7")}


async def test_a_finish_retried_after_a_lost_reply_keeps_the_batch_it_took(
    processes: list[RedisConversations],
) -> None:
    """NEXT forgets the answered batch and takes the next message in one call. Sent again
    (its reply was lost to a Redis restart), it must not forget the batch the first call took:
    it names the answered batch by its text, and that one is gone."""
    q = processes[0]
    c = "fake:a"
    await q.redis.xgroup_create(q.ready, GROUP, id="0", mkstream=True)
    keys, turn = q.claim_keys(c), q.key(c, "turn")
    first, second = messages.dump(msg("a", "first")), messages.dump(msg("a", 'second ü/"x"'))
    await q.redis.rpush(q.key(c, "in"), first)
    token, kind, message, answered, state = await q.scripts["CLAIM"](
        keys=keys, args=q.claim_args(c, "0-1", "look")
    )
    assert (kind, message, state) == (3, first, [])  # a lone message is taken in the claim
    assert q.load_batch(answered) == [msg("a", "first")]
    await q.redis.rpush(q.key(c, "in"), second)
    args = [*q.claim_args(c, "0-1", "", int(token))[:7], answered]
    kind, message, taken, state = await q.scripts["NEXT"](keys=keys, args=args)
    assert (kind, message) == (3, second)
    assert q.load_batch(taken) == [msg("a", 'second ü/"x"')]  # Lua's JSON reads back the same
    assert await q.scripts["NEXT"](keys=keys, args=args) == [2, taken, []]  # the retry keeps it
    assert await q.redis.get(turn) == taken


async def test_an_idle_conversations_turn_runs_where_its_message_was_queued(
    processes: list[RedisConversations],
) -> None:
    """`serve_here`: the queuing process runs the turn itself (a web socket's frames stay in
    its process); otherwise the consumer group hands it to any process, and it runs once."""
    ran: list[tuple[int, str]] = []

    def runner(n: int):  # type: ignore[no-untyped-def]
        async def run(batch: list[InboundMessage], signal: TurnSignal) -> None:
            ran.extend((n, m.text) for m in batch)

        return run

    processes[2].serve_here = lambda message: message.chat.chat_id != "elsewhere"
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(q.run(runner(n))) for n, q in enumerate(processes)]
        for q in processes:
            await q.started.wait()
        for chat in "abcdef":
            await processes[2].enqueue(msg(chat, chat))
            async with asyncio.timeout(10):
                await processes[2].wait_idle()
        await processes[2].enqueue(msg("elsewhere", "x"))
        async with asyncio.timeout(10):
            await processes[2].wait_idle()
        for task in tasks:
            task.cancel()
    assert ran[:6] == [(2, chat) for chat in "abcdef"]
    assert [text for _, text in ran[6:]] == ["x"]


async def test_enqueue_new_claims_the_event_as_it_queues(
    processes: list[RedisConversations],
) -> None:
    """The gateway's dedup claim and the enqueue in one script: a second delivery of the
    event is refused, and a message refused by a full queue leaves no claim behind (its resend
    later is a new message), as with claim, then enqueue, then release."""
    q = processes[0]
    q.dedup = RedisDedup(q.redis, prefix=q.base.removesuffix("q:"))
    q.max_queued = 1
    assert q.claims_for(q.dedup) and not q.claims_for(RedisDedup(q.redis, prefix="other:"))
    turns: list[str] = []
    release = asyncio.Event()

    async def run(batch: list[InboundMessage], signal: TurnSignal) -> None:
        turns.extend(m.text for m in batch)
        await release.wait()

    async with asyncio.TaskGroup() as group:
        task = group.create_task(q.run(run))
        await q.started.wait()
        assert await q.enqueue_new(msg("a", "one"))
        assert not await q.enqueue_new(msg("a", "one"))  # the same event again
        assert await q.enqueue_new(msg("a", "two"))  # queued behind the running turn
        with pytest.raises(QueueFull):
            await q.enqueue_new(msg("a", "three"))
        assert await q.dedup.claim("e:a:three")  # nothing was claimed for it
        release.set()
        async with asyncio.timeout(10):
            await q.wait_idle()
        task.cancel()
    assert turns == ["one", "two"]


async def test_a_lease_taken_back_by_its_own_process_stops_only_the_old_turn(
    processes: list[RedisConversations],
) -> None:
    """A process that stalls past its lease can reclaim its own conversation (XAUTOCLAIM names
    no process) while the old turn still runs here. The heartbeat then finds the old lease lost:
    it must stop the old turn, not the resumed one that now holds the conversation (in CI it
    stopped the resumed one, and the old one, its lease gone, could answer nobody)."""
    q = processes[0]
    c = "fake:a"
    signals: list[TurnSignal] = []
    finished: list[bool] = []
    first_running = asyncio.Event()

    async def run(batch: list[InboundMessage], signal: TurnSignal) -> None:
        signals.append(signal)
        signal.work = asyncio.current_task()
        if not signal.resumed:
            first_running.set()
            try:
                await asyncio.Future()  # the model thinks until it is stopped
            except asyncio.CancelledError:
                asyncio.current_task().uncancel()  # type: ignore[union-attr]
                return
        await asyncio.sleep(3 * q.lease_ms / 1000)  # past the old lease's next heartbeat
        finished.append(signal.resumed)

    async with asyncio.TaskGroup() as group:
        task = group.create_task(q.run(run))
        await q.started.wait()
        await q.enqueue(msg("a", "pay"))
        async with asyncio.timeout(10):
            await first_running.wait()
        pending = await q.redis.xpending_range(q.ready, GROUP, "-", "+", 1)
        await q.redis.delete(q.key(c, "lock"))  # the lease lapsed while the process stalled
        # ... and this process's own XAUTOCLAIM found the entry idle: the reclaim it then serves
        reclaim = group.create_task(q._serve(str(pending[0]["message_id"]), c, reclaimed=True))
        async with asyncio.timeout(15):
            await reclaim
            await q.wait_idle()
        task.cancel()
    old, resumed = signals
    assert (old.resumed, old.lost) == (False, True)
    assert (resumed.resumed, resumed.lost, resumed.stopped) == (True, False, False)
    assert finished == [True]
    assert q.signals == {}


async def test_busy_here_is_this_processs_turns_not_the_others(
    processes: list[RedisConversations],
) -> None:
    started: asyncio.Queue[int] = asyncio.Queue()
    release = asyncio.Event()

    def runner(n: int):  # type: ignore[no-untyped-def]
        async def run(batch: list[InboundMessage], signal: TurnSignal) -> None:
            await started.put(n)
            await release.wait()

        return run

    async with running(processes, runner):
        await processes[0].enqueue(msg("a", "long"))
        async with asyncio.timeout(10):
            runs_on = await started.get()
            assert [q.busy_here() for q in processes] == [n == runs_on for n in range(3)]
            release.set()
            await processes[0].wait_idle()
        assert not any(q.busy_here() for q in processes)
