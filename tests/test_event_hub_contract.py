"""The `EventHub` contract (adapters/hub/), run against every implementation.

To add one, add a backend to `BACKENDS`: an async context manager that yields `processes` hubs
sharing one store, as separate gateway processes would (the in-memory hub is one process, so it
yields the same hub each time), with `max_idle` mapped to whatever bounds its idle conversations.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any, Protocol

import pytest

from adapters.base import ChannelError
from adapters.hub import EventHub, MemoryEventHub
from bot.redis.client import connect
from bot.redis.hub import RedisEventHub
from tests.redis_kit import URL, redis_prefix


@asynccontextmanager
async def memory_backend(
    processes: int, replay_events: int, max_idle: int
) -> AsyncIterator[list[EventHub]]:
    hub = MemoryEventHub(replay_events=replay_events, max_idle=max_idle)
    yield [hub] * processes


@asynccontextmanager
async def redis_backend(
    processes: int, replay_events: int, max_idle: int
) -> AsyncIterator[list[EventHub]]:
    """Each hub with its own connections, as in separate processes; one key prefix."""
    async with redis_prefix() as (_, prefix), AsyncExitStack() as stack:
        hubs: list[EventHub] = []
        for _ in range(processes):
            redis, reader = connect(URL), connect(URL, reader=True)
            stack.push_async_callback(redis.aclose)
            stack.push_async_callback(reader.aclose)
            hub = RedisEventHub(
                redis, reader, prefix=prefix, replay_events=replay_events, max_idle=max_idle
            )
            hubs.append(await stack.enter_async_context(hub))
        yield hubs


Backend = Callable[[int, int, int], AbstractAsyncContextManager[list[EventHub]]]
BACKENDS: dict[str, Backend] = {"memory": memory_backend, "redis": redis_backend}


class MakeHubs(Protocol):
    async def __call__(
        self, *, processes: int = 1, replay_events: int = 200, max_idle: int = 10_000
    ) -> list[EventHub]: ...


@pytest.fixture(params=sorted(BACKENDS))
async def make_hubs(request: pytest.FixtureRequest) -> AsyncIterator[MakeHubs]:
    backend = BACKENDS[request.param]
    async with AsyncExitStack() as stack:

        async def make(
            *, processes: int = 1, replay_events: int = 200, max_idle: int = 10_000
        ) -> list[EventHub]:
            return await stack.enter_async_context(backend(processes, replay_events, max_idle))

        yield make


@pytest.fixture
async def hub(make_hubs: MakeHubs) -> EventHub:
    return (await make_hubs())[0]


class Tab:
    """A subscriber used the way the channel uses one: ready and the replay, then live frames."""

    def __init__(self, *, accepts: int | None = None) -> None:
        self.accepts = accepts  # pushes taken before it reports itself gone; None: never gone
        self.ready_seq: int | None = None
        self.floor: int | None = None
        self.frames: list[dict[str, Any]] = []
        self.early: list[str] = []  # pushed before attach returned: a contract violation
        self.pushes = 0
        self._arrived = asyncio.Event()

    def push(self, frame: str) -> bool:
        self.pushes += 1
        if self.accepts is not None and self.pushes > self.accepts:
            return False
        if self.ready_seq is None:
            self.early.append(frame)
        else:
            self.frames.append(json.loads(frame))
        self._arrived.set()
        return True

    async def join(self, hub: EventHub, conversation: str, resume_after: int | None = None) -> Tab:
        self.ready_seq, replay, self.floor = await hub.attach(conversation, self, resume_after)
        self.frames.extend(json.loads(frame) for frame in replay)
        return self

    @property
    def seqs(self) -> list[int]:
        return [frame["seq"] for frame in self.frames]

    async def until(self, seq: int) -> None:
        """Wait until the frame with `seq` (or a later one) has arrived."""
        async with asyncio.timeout(5):
            while not self.frames or self.frames[-1]["seq"] < seq:
                self._arrived.clear()
                await self._arrived.wait()


async def publish_turn(hub: EventHub, conversation: str, message_id: str = "m1") -> list[int]:
    """A placeholder streamed into an answer: created, two updates, completed."""
    return [
        await hub.publish(conversation, "message.created", {"message_id": message_id, "text": ""}),
        await hub.publish(conversation, "message.updated", {"message_id": message_id, "text": "a"}),
        await hub.publish(
            conversation, "message.updated", {"message_id": message_id, "text": "ab"}
        ),
        await hub.publish(
            conversation, "message.completed", {"message_id": message_id, "text": "abc"}
        ),
    ]


async def test_frames_are_numbered_from_1_and_arrive_in_order(hub: EventHub) -> None:
    tab = await Tab().join(hub, "c")
    assert tab.ready_seq == 0
    assert await publish_turn(hub, "c") == [1, 2, 3, 4]
    assert await hub.publish("c", "agent.started", {"task_id": "t1", "seq": 99}) == 5
    await tab.until(5)
    assert tab.seqs == [1, 2, 3, 4, 5]
    assert tab.frames[0] == {"type": "message.created", "message_id": "m1", "text": "", "seq": 1}
    assert tab.frames[4] == {"type": "agent.started", "task_id": "t1", "seq": 5}
    assert tab.early == []


async def test_replay_holds_the_kept_frames_after_resume_after(hub: EventHub) -> None:
    for n in range(6):
        await hub.publish("c", "agent.started", {"task_id": f"t{n}"})
    resumed = await Tab().join(hub, "c", resume_after=3)
    assert resumed.ready_seq == 6
    assert resumed.seqs == [4, 5, 6]
    assert [f["task_id"] for f in resumed.frames] == ["t3", "t4", "t5"]
    assert (await Tab().join(hub, "c", resume_after=6)).seqs == []
    assert (await Tab().join(hub, "c")).seqs == []  # a fresh tab asks for no history


async def test_replay_keeps_only_the_newest_frames(make_hubs: MakeHubs) -> None:
    small, none = (await make_hubs(replay_events=3))[0], (await make_hubs(replay_events=0))[0]
    for hub in (small, none):
        for n in range(5):
            await hub.publish("c", "agent.started", {"task_id": f"t{n}"})
    kept = await Tab().join(small, "c", resume_after=0)
    assert (kept.seqs, kept.floor) == ([3, 4, 5], 2)  # 1 and 2 let go of
    without = await Tab().join(none, "c", resume_after=0)
    assert (without.ready_seq, without.seqs, without.floor) == (5, [], 5)


async def test_replay_drops_updates_superseded_by_a_later_one(hub: EventHub) -> None:
    live = await Tab().join(hub, "c")
    await hub.publish("c", "message.created", {"message_id": "m1", "text": ""})  # 1
    await hub.publish("c", "message.updated", {"message_id": "m1", "text": "a"})  # 2
    await hub.publish("c", "agent.started", {"task_id": "t1"})  # 3
    await hub.publish("c", "message.updated", {"message_id": "m2", "text": "x"})  # 4
    await hub.publish("c", "message.updated", {"message_id": "m1", "text": "ab"})  # 5
    await hub.publish("c", "message.updated", {"text": "no id: kept"})  # 6
    await hub.publish("c", "message.completed", {"message_id": "m1", "text": "abc"})  # 7
    resumed = await Tab().join(hub, "c", resume_after=0)
    assert (resumed.seqs, resumed.floor) == ([1, 3, 4, 6, 7], 0)  # 2 and 5: superseded only
    assert resumed.frames[-1]["text"] == "abc"
    await live.until(7)
    assert live.seqs == [1, 2, 3, 4, 5, 6, 7]  # superseding only thins the replay


async def test_a_cleared_conversation_replays_nothing_before_the_clear(hub: EventHub) -> None:
    live = await Tab().join(hub, "c")
    await hub.publish("c", "message.user", {"message_id": "c1", "text": "old question"})  # 1
    await hub.publish("c", "message.completed", {"message_id": "m1", "text": "old"})  # 2
    await hub.publish("c", "conversation.cleared", {"reason": "new"})  # 3
    await hub.publish("c", "message.completed", {"message_id": "m2", "text": "fresh"})  # 4
    resumed = await Tab().join(hub, "c", resume_after=0)
    assert resumed.seqs == [3, 4]
    assert [f["type"] for f in resumed.frames] == ["conversation.cleared", "message.completed"]
    await live.until(4)
    assert live.seqs == [1, 2, 3, 4]  # live tabs get everything, the clear included


async def test_a_clear_lets_go_of_the_floor_with_the_frames(make_hubs: MakeHubs) -> None:
    hub = (await make_hubs(replay_events=3))[0]
    for n in range(5):
        await hub.publish("c", "agent.started", {"task_id": f"t{n}"})  # 1-5
    assert (await Tab().join(hub, "c", resume_after=0)).floor == 2
    await hub.publish("c", "conversation.cleared", {"reason": "new"})  # 6
    await hub.publish("c", "message.completed", {"message_id": "m2", "text": "fresh"})  # 7
    resumed = await Tab().join(hub, "c", resume_after=0)
    assert (resumed.seqs, resumed.floor) == ([6, 7], 0)  # all since the clear is kept


async def test_two_tabs_of_one_conversation_both_receive(make_hubs: MakeHubs) -> None:
    first, second, publisher = await make_hubs(processes=3)
    tabs = [await Tab().join(first, "c"), await Tab().join(second, "c")]
    await publish_turn(publisher, "c")
    for tab in tabs:
        await tab.until(4)
        assert tab.seqs == [1, 2, 3, 4]
        assert [f["type"] for f in tab.frames][-1] == "message.completed"


async def test_conversations_are_isolated(make_hubs: MakeHubs) -> None:
    first, second = await make_hubs(processes=2)
    a, b = await Tab().join(first, "a"), await Tab().join(second, "b")
    assert await first.publish("a", "agent.started", {"task_id": "a1"}) == 1
    assert await second.publish("b", "agent.started", {"task_id": "b1"}) == 1
    assert await second.publish("a", "agent.started", {"task_id": "a2"}) == 2
    await a.until(2)
    await b.until(1)
    assert [f["task_id"] for f in a.frames] == ["a1", "a2"]
    assert [f["task_id"] for f in b.frames] == ["b1"]
    assert (await Tab().join(first, "b", resume_after=0)).seqs == [1]


async def test_attaching_while_frames_are_published_leaves_no_gap_and_no_duplicate(
    make_hubs: MakeHubs,
) -> None:
    hubs = await make_hubs(processes=3, replay_events=1000)
    frames = 300
    published = 0
    tabs: list[tuple[Tab, int | None]] = []

    async def publish() -> None:
        nonlocal published
        for n in range(frames):
            published = await hubs[n % 3].publish("c", "agent.started", {"task_id": f"t{n}"})
            await asyncio.sleep(0)

    async def join() -> None:
        for n in range(60):
            # fresh tabs, and reconnecting ones resuming a little behind the newest frame
            resume_after = None if n % 2 else max(0, published - n % 7)
            tabs.append((await Tab().join(hubs[n % 3], "c", resume_after), resume_after))
            await asyncio.sleep(0)

    async with asyncio.TaskGroup() as group:
        group.create_task(publish())
        group.create_task(join())
    for tab, resume_after in tabs:
        await tab.until(frames)
        assert tab.ready_seq is not None
        first = tab.ready_seq if resume_after is None else resume_after
        assert tab.seqs == list(range(first + 1, frames + 1)), (tab.ready_seq, resume_after)
        assert tab.early == []


async def test_frames_published_at_once_from_every_process_arrive_in_order_everywhere(
    make_hubs: MakeHubs,
) -> None:
    """Publishes that overlap (a Redis hub sends them together) from several processes, to
    conversations with a tab on each: every tab gets every frame once, in seq order, and a
    publisher's own tab has its frame when publish returns (it is handed it there)."""
    hubs = await make_hubs(processes=3)
    tabs = {(c, n): await Tab().join(hub, c) for c in "ab" for n, hub in enumerate(hubs)}
    late: list[tuple[str, int]] = []

    async def publisher(n: int, c: str) -> list[int]:
        seqs = []
        for i in range(20):
            seq = await hubs[n].publish(c, "agent.started", {"task_id": f"{n}-{i}"})
            if seq not in tabs[(c, n)].seqs:
                late.append((c, seq))
            seqs.append(seq)
        return seqs

    published = await asyncio.gather(*(publisher(n, c) for c in "ab" for n in range(3)))
    for c, runs in (("a", published[:3]), ("b", published[3:])):
        assert sorted(seq for run in runs for seq in run) == list(range(1, 61))
        assert all(run == sorted(run) for run in runs)  # one publisher's frames keep its order
        for n in range(3):
            await tabs[(c, n)].until(60)
            assert tabs[(c, n)].seqs == list(range(1, 61))
    assert late == []


async def test_detach_stops_delivery(hub: EventHub) -> None:
    gone, stays = await Tab().join(hub, "c"), await Tab().join(hub, "c")
    await hub.publish("c", "agent.started", {"task_id": "t1"})
    await gone.until(1)
    await hub.detach("c", gone)
    await hub.detach("c", gone)  # twice is harmless
    await hub.detach("other", Tab())  # and so is a subscriber that never attached
    await hub.publish("c", "agent.started", {"task_id": "t2"})
    await stays.until(2)
    assert (gone.seqs, stays.seqs) == ([1], [1, 2])


async def test_a_subscriber_that_is_gone_is_dropped(hub: EventHub) -> None:
    dead, alive = await Tab(accepts=1).join(hub, "c"), await Tab().join(hub, "c")
    await publish_turn(hub, "c")
    await alive.until(4)
    assert dead.seqs == [1]
    assert dead.pushes == 2  # refused the second frame, and was never asked again
    assert alive.seqs == [1, 2, 3, 4]


async def test_a_frame_that_is_not_json_raises_and_takes_no_seq(hub: EventHub) -> None:
    tab = await Tab().join(hub, "c")
    with pytest.raises(ChannelError, match=r"agent\.started frame for 'c' is not JSON"):
        await hub.publish("c", "agent.started", {"task_id": object()})
    assert await hub.publish("c", "agent.started", {"task_id": "t1"}) == 1
    await tab.until(1)
    assert tab.seqs == [1]
    assert (await Tab().join(hub, "c", resume_after=0)).seqs == [1]


async def test_idle_conversations_are_bounded_and_live_ones_kept(make_hubs: MakeHubs) -> None:
    hub = (await make_hubs(max_idle=2))[0]
    live = await Tab().join(hub, "live")
    await hub.publish("live", "agent.started", {"task_id": "t0"})
    left = await Tab().join(hub, "left")
    await hub.publish("left", "agent.started", {"task_id": "t0"})
    await hub.detach("left", left)  # idle from here on
    dropped = await Tab(accepts=0).join(hub, "dropped")
    await hub.publish("dropped", "agent.started", {"task_id": "t0"})  # idle once dropped
    for n in range(3):
        await hub.publish(f"idle-{n}", "agent.started", {"task_id": "t0"})
    assert dropped.pushes == 1
    # left, dropped and idle-0 fell out of the two idle places; a forgotten one starts at 0
    for name in ("left", "dropped", "idle-0"):
        forgotten = await Tab().join(hub, name, resume_after=0)
        assert (forgotten.ready_seq, forgotten.seqs) == (0, []), name
    await live.until(1)
    for name in ("live", "idle-2"):
        kept = await Tab().join(hub, name, resume_after=0)
        assert (kept.ready_seq, kept.seqs) == (1, [1]), name


async def test_many_conversations_attach_at_once(hub: EventHub) -> None:
    """Sockets of different conversations saying hello together (a server just restarted)."""
    tabs = await asyncio.gather(*(Tab().join(hub, f"c{n}") for n in range(20)))
    for n in range(20):
        await hub.publish(f"c{n}", "agent.started", {"task_id": f"t{n}"})
    for n, tab in enumerate(tabs):
        await tab.until(1)
        assert [f["task_id"] for f in tab.frames] == [f"t{n}"]
