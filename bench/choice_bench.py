"""Benchmark: what the per-chat model and the soft budget add to a turn, on each backend.

A turn with `llm.choices` set reads the conversation's state once (its chosen model and
persona); with a `soft_ratio` it also reads the quota counters and, past the soft limit, takes
the crossing's marker. This times `ChatChoices.for_turn` (after `Quotas.admit`, as a turn runs
it; the admission itself is the quotas' cost, not timed) against the real SQLite store and, if
one answers, the real Redis, and prints the CPU and wall time per turn for: no choices
configured, a chosen model (its own read of the state, and the state a turn already read for
its language handed in, as `TurnRunner` does), and past a soft limit (the state handed in).

    python bench/choice_bench.py [--turns 2000] [--redis redis://127.0.0.1:6379/0]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from adapters.base import ChatRef, InboundMessage  # noqa: E402
from agent.providers.offline import OfflineProvider  # noqa: E402
from bot.pipeline.chat_choice import MODEL, ChatChoices, ModelMenu  # noqa: E402
from bot.pipeline.conversation_state import ConversationState, StoredConversationState  # noqa: E402
from bot.pipeline.persona_choice import PersonaChoice  # noqa: E402
from bot.pipeline.quota import Quotas, QuotaState, StoreQuotaState  # noqa: E402
from bot.runtime.config.choices import ModelChoice  # noqa: E402
from bot.runtime.config.schema import QuotaLimits, QuotasConfig  # noqa: E402
from bot.storage import SqliteStore  # noqa: E402

CHOICE = ModelChoice(name="mini", provider="offline", display="mini")


def choices(
    states: ConversationState, quota_state: QuotaState, *, menu: bool, soft: bool
) -> tuple[ChatChoices, Quotas]:
    limits = QuotaLimits(turns_per_day=10**9, soft_ratio=1e-9 if soft else None)
    quotas = Quotas(QuotasConfig(per_user=limits), quota_state)
    models = ModelMenu([CHOICE], {"mini": OfflineProvider()}, default_display="default")
    chat = ChatChoices(
        states,
        personas=PersonaChoice(),
        menu=models if menu else ModelMenu([], {}, default_display="default"),
        quotas=quotas,
        soft_model="mini" if soft else None,
    )
    return chat, quotas


async def run_case(
    name: str,
    states: ConversationState,
    quota_state: QuotaState,
    turns: int,
    *,
    reuse: bool = False,
    **kind: bool,
) -> None:
    """`reuse`: the state is handed in, as a turn hands in the one it read for its language."""
    chat, quotas = choices(states, quota_state, **kind)
    message = InboundMessage(ChatRef("telegram", uuid.uuid4().hex), "u1", "hi", "e1")
    key = message.conversation_key
    await states.update(key, lambda state: state.with_setting(MODEL, "mini"))
    for _ in range(50):  # warm: compiled statements, the first marker taken
        await quotas.admit(message)
        await chat.for_turn(message, "en")
    await quotas.admit(message)  # counted once: every later read finds it past any soft ratio
    state = await states.get(key) if reuse else None
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(turns):
        await chat.for_turn(message, "en", state)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(
        f"{name:<34} CPU {1e6 * cpu / turns:6.1f} µs/turn, wall {1e6 * wall / turns:6.1f} µs/turn"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        async with SqliteStore(Path(folder) / "bot.db") as store:
            states, counters = StoredConversationState(store), StoreQuotaState(store)
            for label, kind in (
                ("sqlite: no choices", {"menu": False, "soft": False}),
                ("sqlite: a chosen model", {"menu": True, "soft": False}),
                ("sqlite: chosen, state reused", {"menu": True, "soft": False, "reuse": True}),
                ("sqlite: reused, past a soft limit", {"menu": True, "soft": True, "reuse": True}),
            ):
                await run_case(label, states, counters, args.turns, **kind)
    try:
        from bot.redis.client import connect
        from bot.redis.quota import RedisQuotaState
        from bot.redis.states import redis_conversation_state

        redis = connect(args.redis)
        await redis.ping()
    except Exception as exc:  # a figure for SQLite is still worth printing
        print(f"redis: not measured ({type(exc).__name__}: {exc})")
        return
    prefix = f"bench-choice-{uuid.uuid4().hex[:8]}:"
    try:
        states_r = redis_conversation_state(redis, prefix=prefix)
        counters_r = RedisQuotaState(redis, prefix=prefix)
        for label, kind in (
            ("redis: no choices", {"menu": False, "soft": False}),
            ("redis: a chosen model", {"menu": True, "soft": False}),
            ("redis: chosen, state reused", {"menu": True, "soft": False, "reuse": True}),
            ("redis: reused, past a soft limit", {"menu": True, "soft": True, "reuse": True}),
        ):
            await run_case(label, states_r, counters_r, args.turns, **kind)
    finally:
        keys = [key async for key in redis.scan_iter(match=f"{prefix}*", count=1000)]
        if keys:
            await redis.delete(*keys)
        await redis.aclose()


if __name__ == "__main__":
    asyncio.run(main())
