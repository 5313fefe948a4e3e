"""Benchmark: twenty Slack threads in one workspace answering long streamed replies at once.

The real gateway, slack-bolt (Socket Mode) and slack_sdk talk to tests/slack_fake.py, which
enforces Slack's limits: `chat.update` about 50 a minute per workspace (Tier 3, a burst of 5)
and `chat.postMessage` about one a second per channel (a burst of 10); past them it answers 429
`ratelimited` with a Retry-After. Each thread is a mention in a channel; a scripted model
streams each answer in 0.1 s pieces. Prints the 429 count (the target is zero), edits per
answer, and the time from the event to the placeholder and to the final text.

    python bench/slack_bench.py [--threads 20] [--channels 4] [--chars 3000] [--stream-s 12]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.providers.scripted import Reply, ScriptedProvider
from bench.percentiles import ms
from bot.runtime.app import App
from bot.runtime.config import load_config
from tests.slack_events import BOT_USER, envelope, message
from tests.slack_fake import APP_TOKEN, BOT_TOKEN, FakeSlack


async def run(threads: int, channels: int, chars: int, stream_s: float, per_minute: float) -> None:
    fake = FakeSlack(updates_per_minute=per_minute)
    await fake.start()
    answer = " ".join(f"w{i:04d}" for i in range(chars // 6 + 1))[:chars]
    pieces = max(1, int(stream_s / 0.1))
    provider = ScriptedProvider(
        lambda request: Reply(answer, chunks=pieces, delay_s=stream_s / pieces)
    )
    with tempfile.TemporaryDirectory() as data:
        path = Path(data) / "config.yaml"
        slack = {"enabled": True, "api_base": fake.url}
        path.write_text(
            json.dumps(
                {
                    "server": {"port": 0},
                    "storage": {"path": str(Path(data) / "bench.db")},
                    "personas": {"dirs": [str(ROOT / "personas")]},
                    "channels": {"slack": slack},
                }
            )
        )
        env = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN}
        config = load_config(path, env=env)
        async with App(config, base_dir=Path(data), provider=provider) as app:
            await fake.wait_for(lambda: fake.connected > 0)
            events = [
                message(f"<@{BOT_USER}> tell me everything", channel=f"C{n % channels}")
                for n in range(threads)
            ]
            started = time.monotonic()
            asked = {}
            for event in events:
                asked[(event["channel"], event["ts"])] = time.monotonic()
                await fake.push("events_api", envelope(event))
            await provider.wait_requests(threads)
            await app.gateway.wait_idle()  # every turn done: its final landed
            wall = time.monotonic() - started
        await fake.close()
    _report(fake, asked, answer, wall, threads, channels, chars, stream_s, per_minute)


def _report(
    fake: FakeSlack,
    asked: dict[tuple[str, str], float],
    answer: str,
    wall: float,
    threads: int,
    channels: int,
    chars: int,
    stream_s: float,
    per_minute: float,
) -> None:
    thread_of = {(m.channel, m.ts): (m.channel, m.thread_ts) for m in fake.bot_messages()}
    placeholder, final, edits, complete, parts = [], [], [], 0, []
    for key, at in asked.items():
        posts = [
            c
            for c in fake.ok("chat.postMessage")
            if (c.params["channel"], c.params.get("thread_ts")) == key
        ]
        updates = [
            c
            for c in fake.ok("chat.update")
            if thread_of.get((c.params["channel"], c.params["ts"])) == key
        ]
        placeholder.append(posts[0].at - at)
        final.append(max(c.at for c in posts + updates) - at)
        edits.append(len(updates))
        shown = fake.thread(*key)
        parts.append(len(shown))
        complete += " ".join(shown).split() == answer.split()
    placeholder.sort()
    final.sort()
    updates_all = fake.ok("chat.update")
    span = (updates_all[-1].at - updates_all[0].at) if len(updates_all) > 1 else 0.0
    print(
        f"Slack: {threads} threads in one workspace ({channels} channel(s)) x one {chars}-character "
        f"answer streamed over {stream_s:g} s; the fake allows {per_minute:g} chat.update/min "
        "per workspace (burst 5) and 1 post/s per channel (burst 10)"
    )
    print(f"  answers complete and in order  : {complete}/{threads}")
    print(f"  messages per answer            : {min(parts)}..{max(parts)}")
    print(
        f"  edits per answer (chat.update) : min {min(edits)}, mean {statistics.mean(edits):.1f}, "
        f"max {max(edits)} ({len(updates_all)} in all, "
        f"{len(updates_all) / span * 60 if span else 0:.1f}/min over {span:.0f} s)"
    )
    print(f"  ratelimited (429) from the fake: {len(fake.ratelimited)}")
    print(
        f"  event -> placeholder           : p50 {ms(placeholder, 0.5)} ms, "
        f"max {placeholder[-1] * 1000:.1f} ms"
    )
    print(
        f"  event -> final text            : p50 {final[len(final) // 2]:.1f} s, "
        f"max {final[-1]:.1f} s (the model streams for {stream_s:g} s)"
    )
    print(f"  wall time                      : {wall:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=20)
    parser.add_argument("--channels", type=int, default=4, help="channels the threads are in")
    parser.add_argument("--chars", type=int, default=3000, help="length of each answer")
    parser.add_argument("--stream-s", type=float, default=12.0, help="how long each answer streams")
    parser.add_argument(
        "--per-minute", type=float, default=50, help="chat.update/min the fake allows"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    asyncio.run(run(args.threads, args.channels, args.chars, args.stream_s, args.per_minute))


if __name__ == "__main__":
    main()
