"""Benchmark: what the pairing gate costs the store, per direct message, on SQLite or PostgreSQL.

Three cases: an approved sender (the everyday one: one indexed read, no lock), one sender
spamming within `resend_s` (a locked read and an update, no reply), and a flood of distinct
senders against a full cap (a locked read and a count, nothing written). CPU of this process
and wall time per call, straight on the store (no channel, no model).

    python bench/pairing_bench.py [--calls 2000] [--pg postgresql://127.0.0.1/test]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.storage.backends import AnyStore, build_store  # noqa: E402
from bot.storage.pairings import PairingRequest  # noqa: E402

ASK = PairingRequest(
    channel="telegram",
    user_id="approved",
    chat='{"channel": "telegram", "chat_id": "1"}',
    user_name=None,
    language="en",
    code="ABCD2345",
    now=time.time(),
    ttl_s=3600,
    max_pending=10,
    resend_s=3600,
)


async def _measure(label: str, store: AnyStore, asks: list[PairingRequest]) -> None:
    cpu, wall = time.process_time(), time.perf_counter()
    outcomes = {(await store.pairing_request(ask)).outcome for ask in asks}
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    per = 1e6 / len(asks)
    print(f"  {label:<34} {wall * per:8.0f} µs wall  {cpu * per:8.0f} µs CPU  outcomes {outcomes}")


async def run(store: AnyStore, calls: int) -> None:
    async with store:
        now = ASK.now
        await store.pairing_request(ASK)
        await store.pairing_decide("ABCD2345", approve=True, by="bench", now=now, block_s=0)
        await _measure("approved sender", store, [ASK] * calls)
        spam = replace(ASK, user_id="spammer", code="SPAM2345")
        await store.pairing_request(spam)
        await _measure("one sender spamming (quiet)", store, [spam] * calls)
        for n in range(ASK.max_pending - 1):  # fill the cap
            await store.pairing_request(replace(ASK, user_id=f"fill{n}", code=f"FILL{n:04d}"))
        flood = [replace(ASK, user_id=f"flood{n}", code="FLOOD234") for n in range(calls)]
        await _measure("distinct senders past the cap", store, flood)
        print(
            f"  pending codes after the flood: {len(await store.pairing_rows('pending', now=now))}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--pg", help="a PostgreSQL URL (its tables are created if missing)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        print(f"SQLite ({args.calls} calls each)")
        asyncio.run(run(build_store(Path(folder) / "bench.db", None), args.calls))
    if args.pg:
        print(f"PostgreSQL ({args.calls} calls each)")
        asyncio.run(run(build_store("unused", args.pg), args.calls))


if __name__ == "__main__":
    main()
