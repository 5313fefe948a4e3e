"""Benchmark: what a handoff costs the turns that never use one, and how fast Take settles.

1. The turn's edges (`HandoffRelay.before_turn` + `after_turn`) for a conversation in bot mode:
   CPU per turn, on the SQLite store and on Redis (when one answers at 127.0.0.1:6379) — the
   one state read every turn pays once an operators' place or the admin view is configured.
2. `--operators` desks (processes sharing one store) pressing Take on one handoff at once:
   wall time until the one winner and every loser's answer, p50/p99 over `--races` races.

    python bench/handoff_bench.py [--turns 5000] [--races 50] [--operators 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from adapters.base import ChannelLimits, ChatRef, InboundMessage, MessageHandle, OutboundContent  # noqa: E402
from bot.handoff.desk import HandoffDesk  # noqa: E402
from bot.handoff.model import AlreadyTaken, Asked, HandoffSettings, Operator  # noqa: E402
from bot.handoff.relay import HandoffRelay  # noqa: E402
from bot.pipeline.conversation_state import ConversationState, StoredConversationState  # noqa: E402
from bot.runtime.config.handoff import Place  # noqa: E402
from bot.storage.backends import AnyStore, build_store  # noqa: E402


class Quiet:
    """A channel that only counts (what the user would see is not measured here)."""

    name = "telegram"
    sent = 0

    def limits_for(self, chat: ChatRef) -> ChannelLimits:
        return ChannelLimits()

    async def run(self, inbox: Any) -> None:  # never run: the bench calls the gateway itself
        raise NotImplementedError("a counting double: it receives nothing")

    async def send(self, chat: ChatRef, content: OutboundContent, **_: Any) -> MessageHandle:
        self.sent += 1
        return MessageHandle(chat, str(self.sent))

    async def edit(self, handle: MessageHandle, content: OutboundContent, **_: Any) -> None:
        return None


class Claims:
    async def claim(self, event_id: str) -> bool:
        return True

    async def release(self, event_id: str) -> None:
        return None


def desk(store: AnyStore, states: ConversationState) -> HandoffDesk:
    async def session_for(channel: str, key: str, user: str) -> str:
        return await store.active_session(channel=channel, conversation_key=key, user_id=user)

    return HandoffDesk(
        settings=HandoffSettings(place=Place("slack", "COPS")),
        states=states,
        records=store,
        history=store,
        session_for=session_for,
        channels={"telegram": Quiet()},
        claims=Claims(),
    )


async def edges(relay: HandoffRelay, turns: int) -> float:
    """CPU µs per turn of the two edges, for a conversation in bot mode."""

    async def hold(message: InboundMessage, mode: str) -> None:
        raise AssertionError("a bot-mode turn is never held")

    batch = [InboundMessage(ChatRef("telegram", "1"), "7", "hello", "e1")]
    for _ in range(200):  # warm the store's statements
        await relay.after_turn(await relay.before_turn(batch, hold))
    started = time.process_time()
    for _ in range(turns):
        await relay.after_turn(await relay.before_turn(batch, hold))
    return (time.process_time() - started) / turns * 1e6


async def races(stores: list[AnyStore], races: int, operators: int) -> list[float]:
    desks = [
        desk(stores[i % len(stores)], StoredConversationState(stores[i % len(stores)]))
        for i in range(operators)
    ]
    took: list[float] = []
    for n in range(races):
        chat = ChatRef("telegram", f"race{n}")
        await desks[0].ask(chat, Asked("bench", "", "7"), language="en", via="bench")
        handoff = await desks[0].open_for(chat.key)
        assert handoff is not None
        started = time.perf_counter()
        results = await asyncio.gather(
            *(
                d.take(handoff.id, Operator(f"admin:op{i}", f"op{i}"), via="bench")
                for i, d in enumerate(desks)
            ),
            return_exceptions=True,
        )
        took.append((time.perf_counter() - started) * 1000)
        lost = sum(isinstance(r, AlreadyTaken) for r in results)
        assert lost == operators - 1, results
    return took


async def main(turns: int, race_count: int, operators: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        async with (
            build_store(Path(folder) / "bot.db", None) as store,
            build_store(Path(folder) / "bot.db", None) as other,
        ):
            relay = HandoffRelay(desk(store, StoredConversationState(store)), {})
            out["edges_us_per_turn_sqlite"] = round(await edges(relay, turns), 1)
            took = await races([store, other], race_count, operators)
            ranked = sorted(took)
            out[f"take_race_{operators}_ms_p50"] = round(ranked[len(ranked) // 2], 2)
            out[f"take_race_{operators}_ms_p99"] = round(ranked[int(len(ranked) * 0.99)], 2)
        try:
            from redis.asyncio import Redis

            from bot.redis.states import RedisStateRecords

            redis = Redis.from_url("redis://127.0.0.1:6379")
            await redis.ping()
            async with build_store(Path(folder) / "r.db", None) as store:
                states = StoredConversationState(RedisStateRecords(redis, prefix="bench-handoff:"))
                relay = HandoffRelay(desk(store, states), {})
                out["edges_us_per_turn_redis"] = round(await edges(relay, turns), 1)
            await redis.aclose()
        except OSError as exc:
            out["edges_us_per_turn_redis"] = f"skipped: {exc}"
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=5000)
    parser.add_argument("--races", type=int, default=50)
    parser.add_argument("--operators", type=int, default=8)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.turns, args.races, args.operators)), indent=2))
