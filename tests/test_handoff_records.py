"""The store's handoff records (`HandoffRecords`), on SQLite and PostgreSQL, and the desk's
compare-and-set over every shared state backend: several desks (processes) racing Take on one
handoff, one wins; racing the queue timeout against Take, exactly one of them lands."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from adapters.base import ChannelError, ChannelLimits, ChatRef, MessageHandle, OutboundContent
from bot.handoff.desk import HandoffDesk
from bot.handoff.feed import HandoffFeed
from bot.handoff.model import AlreadyTaken, Asked, HandoffSettings, Operator
from bot.pipeline.conversation_state import ConversationState, StoredConversationState
from bot.redis.client import connect
from bot.redis.hub import RedisEventHub
from bot.redis.states import RedisStateRecords
from bot.runtime.config.handoff import Place
from bot.storage.backends import AnyStore, build_store
from bot.storage.rows import HandoffRow
from bot.storage.turns import chat_record
from tests.pg_kit import pg_database, pg_url
from tests.redis_kit import URL, redis_prefix

__all__ = ["pg_database", "pg_url"]

CHAT = ChatRef("telegram", "42")


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest) -> str | None:
    """None for SQLite (a file), or the url of the test's PostgreSQL database."""
    return request.getfixturevalue("pg_url") if request.param == "postgresql" else None


@pytest.fixture(params=["sqlite", "postgresql", "redis"])
def backend(request: pytest.FixtureRequest) -> tuple[str, str | None]:
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    return request.param, url


@pytest.fixture
async def store(database: str | None, tmp_path: Path) -> AsyncIterator[AnyStore]:
    async with build_store(tmp_path / "bot.db", database) as opened:
        yield opened


def row(handoff_id: str, at: float, **changes: Any) -> HandoffRow:
    made = HandoffRow(
        handoff_id, CHAT.key, "telegram", json.dumps(chat_record(CHAT)), "7", "Alice", "en",
        "a refund", "wants 300 EUR back", "waiting", None, None, at, None, None, None,
    )  # fmt: skip
    return replace(made, **changes)


async def test_rows_are_saved_whole_listed_searched_and_paged(store: AnyStore) -> None:
    await store.save_handoff(row("h1", 100.0))
    await store.save_handoff(row("h2", 200.0, user_name="Bob", reason="broken card"))
    await store.save_handoff(row("h3", 300.0, status="resolved", thread="1700.0001"))
    changed = row(
        "h1", 100.0, status="human", operator="admin:ana", operator_name="Ana", taken_at=150.0
    )
    await store.save_handoff(changed)
    assert await store.get_handoff("h1") == changed
    assert await store.get_handoff("nope") is None
    assert (await store.handoff_by_thread("1700.0001")) == row(
        "h3", 300.0, status="resolved", thread="1700.0001"
    )
    ids = [r.id for r in await store.list_handoffs()]
    assert ids == ["h3", "h2", "h1"]  # newest first
    assert [r.id for r in await store.list_handoffs(statuses=("waiting", "human"))] == ["h2", "h1"]
    assert [r.id for r in await store.list_handoffs(search="CARD")] == ["h2"]
    assert [r.id for r in await store.list_handoffs(search="100%")] == []  # a literal %
    assert [r.id for r in await store.list_handoffs(limit=1, offset=1)] == ["h2"]


async def test_every_action_is_audited_in_order(store: AnyStore) -> None:
    await store.save_handoff(row("h1", 100.0))
    await store.audit_handoff("h1", at=101.0, actor="user:7", action="requested", detail="/human")
    await store.audit_handoff("h1", at=102.0, actor="admin:ana", action="took")
    events = await store.handoff_events("h1")
    assert [(e.actor, e.action, e.detail) for e in events] == [
        ("user:7", "requested", "/human"),
        ("admin:ana", "took", ""),
    ]
    assert await store.handoff_events("h2") == []


async def test_conversations_are_searched_and_paged(store: AnyStore) -> None:
    for n in range(3):
        await store.active_session(
            channel="telegram", conversation_key=f"telegram:{n}", user_id=f"u{n}"
        )
    found = await store.conversations(search="TELEGRAM:1")
    assert [c.conversation_key for c in found] == ["telegram:1"]
    first = await store.conversations(limit=2)
    second = await store.conversations(limit=2, offset=2)
    assert len(first) == 2 and len(second) == 1
    assert {c.id for c in first} | {c.id for c in second} == {
        c.id for c in await store.conversations()
    }


# -- the desk's races, over every backend several processes share ---------------------------


class Recorder:
    """A channel that keeps what it was asked to send (the user's chat, the operators');
    `down`: it refuses, as a platform that is unreachable does."""

    name = "telegram"

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []
        self.down = False
        self.changed = asyncio.Event()

    async def said(self, part: str) -> None:
        """Until a message containing `part` was sent."""
        while not any(part in text for _, text in self.sent):
            self.changed.clear()
            await self.changed.wait()

    def limits_for(self, chat: ChatRef) -> ChannelLimits:
        return ChannelLimits()

    async def run(self, inbox: Any) -> None:  # pragma: no cover - never run here
        raise NotImplementedError

    async def send(self, chat: ChatRef, content: OutboundContent, **_: Any) -> MessageHandle:
        if self.down:
            raise ChannelError("the platform is unreachable")
        self.sent.append((chat.key, content.text))
        self.changed.set()
        return MessageHandle(chat, str(len(self.sent)))

    async def edit(self, handle: MessageHandle, content: OutboundContent, **_: Any) -> None:
        self.sent.append((handle.chat.key, content.text))


class Watched(HandoffFeed):
    """The real feed, telling the test once its process listens (no sleep to guess it)."""

    def __init__(self, hub: Any) -> None:
        super().__init__(hub)
        self.ready = asyncio.Event()

    @asynccontextmanager
    async def subscribe(self, topic: str) -> AsyncIterator[asyncio.Queue[str]]:
        async with super().subscribe(topic) as queue:
            self.ready.set()
            yield queue


class Claims:
    def __init__(self) -> None:
        self.seen: set[str] = set()

    async def claim(self, event_id: str) -> bool:
        new = event_id not in self.seen
        self.seen.add(event_id)
        return new

    async def release(self, event_id: str) -> None:
        self.seen.discard(event_id)


MakeDesks = Callable[[int], list[HandoffDesk]]


@pytest.fixture
async def desks(
    backend: tuple[str, str | None], tmp_path: Path
) -> AsyncIterator[tuple[MakeDesks, Recorder]]:
    """`make(n)`: n desks on one shared backend, as n processes have; and the user's channel."""
    kind, url = backend
    channel = Recorder()
    async with AsyncExitStack() as stack:
        stores = [
            await stack.enter_async_context(build_store(tmp_path / "bot.db", url)) for _ in range(2)
        ]
        states: list[ConversationState]
        if kind == "redis":
            redis, prefix = await stack.enter_async_context(redis_prefix())
            states = [
                StoredConversationState(RedisStateRecords(redis, prefix=prefix)) for _ in range(2)
            ]
        else:
            states = [StoredConversationState(s) for s in stores]

        async def session_for(channel_name: str, key: str, user: str) -> str:
            return await stores[0].active_session(
                channel=channel_name, conversation_key=key, user_id=user
            )

        def make(n: int) -> list[HandoffDesk]:
            settings = HandoffSettings(place=Place("slack", "COPS"), queue_timeout_s=600)
            return [
                HandoffDesk(
                    settings=settings,
                    states=states[i % 2],
                    records=stores[i % 2],
                    history=stores[i % 2],
                    session_for=session_for,
                    channels={"telegram": channel},
                    claims=Claims(),
                )  # fmt: skip
                for i in range(n)
            ]

        yield make, channel


async def test_operators_racing_take_on_several_processes_one_wins(
    desks: tuple[MakeDesks, Recorder],
) -> None:
    make, channel = desks
    many = make(6)
    notice = await many[0].ask(CHAT, Asked("a refund", "", "7"), language="en", via="/human")
    assert "asked a person" in notice
    [waiting] = await many[0].records.list_handoffs(statuses=("waiting",))
    results = await asyncio.gather(
        *(
            d.take(waiting.id, Operator(f"admin:op{i}", f"op{i}"), via="test")
            for i, d in enumerate(many)
        ),
        return_exceptions=True,
    )
    won = [r for r in results if isinstance(r, HandoffRow)]
    lost = [r for r in results if isinstance(r, AlreadyTaken)]
    assert len(won) == 1 and len(lost) == 5, results
    state = await many[3].states.get(CHAT.key)
    assert state.mode == "human" and state.assignee == won[0].operator
    assert [t for _, t in channel.sent if "has joined" in t] == [
        f"{won[0].operator_name} has joined the conversation and will answer you here."
    ]
    took = [e for e in await many[0].records.handoff_events(waiting.id) if e.action == "took"]
    assert len(took) == 1


async def test_the_timeout_and_a_take_race_and_one_lands(desks: tuple[MakeDesks, Recorder]) -> None:
    make, channel = desks
    first, second = make(2)
    await first.ask(CHAT, Asked("a refund", "", "7"), language="en", via="/human")
    [waiting] = await first.records.list_handoffs(statuses=("waiting",))
    results = await asyncio.gather(
        first.expire(waiting.id),
        second.take(waiting.id, Operator("admin:ana", "Ana"), via="test"),
        return_exceptions=True,
    )
    final = await first.records.get_handoff(waiting.id)
    assert final is not None
    expired = any("nobody could take over" in t for _, t in channel.sent)
    joined = any("has joined" in t for _, t in channel.sent)
    assert expired != joined, (results, channel.sent)  # exactly one of them happened
    assert final.status == ("expired" if expired else "human")
    mode = (await second.states.get(CHAT.key)).mode
    assert mode == ("bot" if expired else "human")


async def test_a_reply_the_channel_refused_can_be_sent_again_once(
    desks: tuple[MakeDesks, Recorder],
) -> None:
    make, channel = desks
    [desk] = make(1)
    await desk.ask(CHAT, Asked("a refund", "", "7"), language="en", via="/human")
    [waiting] = await desk.records.list_handoffs(statuses=("waiting",))
    ana = Operator("admin:ana", "Ana")
    await desk.take(waiting.id, ana, via="test")
    channel.down = True
    with pytest.raises(ChannelError):
        await desk.reply(waiting.id, ana, "Approved.", event_id="form-1", via="test")
    channel.down = False
    assert await desk.reply(waiting.id, ana, "Approved.", event_id="form-1", via="test")
    assert not await desk.reply(waiting.id, ana, "Approved.", event_id="form-1", via="test")
    assert [t for _, t in channel.sent if "Approved." in t] == ["**Ana:** Approved."]


async def test_the_live_feed_reaches_another_process_over_redis() -> None:
    """Two processes' feeds on one Redis: a page on one sees what the other's desk did."""
    async with redis_prefix() as (_, prefix), AsyncExitStack() as stack:
        feeds = []
        for _ in range(2):
            redis, reader = connect(URL), connect(URL, reader=True)
            stack.push_async_callback(redis.aclose)
            stack.push_async_callback(reader.aclose)
            hub = RedisEventHub(redis, reader, prefix=prefix, replay_events=10)
            feeds.append(HandoffFeed(await stack.enter_async_context(hub)))
        async with feeds[0].subscribe("h1") as one, feeds[0].subscribe("*") as every:
            await feeds[1].publish("h1", {"kind": "state", "mode": "human", "operator": "Ana"})
            await feeds[1].publish("h2", {"kind": "message", "role": "user", "text": "hi"})
            async with asyncio.timeout(10):
                first = json.loads(await one.get())
                seen = [json.loads(await every.get()) for _ in range(2)]
        assert (first["type"], first["handoff_id"], first["operator"]) == ("state", "h1", "Ana")
        assert [(e["type"], e["handoff_id"]) for e in seen] == [("state", "h1"), ("message", "h2")]
        assert one.empty()  # h2's event is not h1's


async def test_another_process_expires_a_handoff_whose_process_died(tmp_path: Path) -> None:
    """A opens the handoff and dies before its timer fires; B, watching over Redis, expires it."""
    channel = Recorder()
    async with (
        redis_prefix() as (redis, prefix),
        build_store(tmp_path / "bot.db", None) as store,
        AsyncExitStack() as stack,
    ):
        desks = []
        for _ in range(2):
            writer, reader = connect(URL), connect(URL, reader=True)
            stack.push_async_callback(writer.aclose)
            stack.push_async_callback(reader.aclose)
            hub = await stack.enter_async_context(
                RedisEventHub(writer, reader, prefix=prefix, replay_events=10)
            )

            async def session_for(channel_name: str, key: str, user: str) -> str:
                return await store.active_session(
                    channel=channel_name, conversation_key=key, user_id=user
                )

            desks.append(
                HandoffDesk(
                    settings=HandoffSettings(place=Place("slack", "COPS"), queue_timeout_s=0.3),
                    states=StoredConversationState(RedisStateRecords(redis, prefix=prefix)),
                    records=store,
                    history=store,
                    session_for=session_for,
                    channels={"telegram": channel},
                    claims=Claims(),
                    feed=Watched(hub),
                )  # fmt: skip
            )
        first, second = desks
        watched = second.feed
        assert isinstance(watched, Watched)
        watching = asyncio.create_task(second.run())
        try:
            async with asyncio.timeout(10):
                await watched.ready.wait()  # B listens before A opens the handoff
                await first.ask(CHAT, Asked("a refund", "", "7"), language="en", via="/human")
                opened = await first.open_for(CHAT.key)
                assert opened is not None
                first.timeouts.cancel(opened.id)  # A "dies": its own timer never fires
                await channel.said("nobody could take over")
        finally:
            watching.cancel()
        [row] = await store.list_handoffs()
        assert row.status == "expired"
        assert (await first.states.get(CHAT.key)).mode == "bot"
