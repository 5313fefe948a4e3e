"""Benchmark: Slack threads in one workspace answering long streamed replies at once.

The real gateway, slack-bolt (Socket Mode) and slack_sdk talk to tests/slack_fake.py, which
enforces Slack's limits: `chat.update` about 50 a minute per workspace (Tier 3, a burst of 5),
`chat.postMessage` about one a second per channel (a burst of 10), `chat.appendStream` 100 a
minute (Tier 4) and `chat.startStream`/`stopStream` 20 a minute each (Tier 2); past them it
answers 429 `ratelimited` with a Retry-After. Each thread is a mention in a channel; a scripted
model streams each answer in 0.1 s pieces. Run once per `channels.slack.streaming` mode, it
prints the 429 count (the target is zero), messages and calls per answer, and the time from the
event to the placeholder, to the first visible piece of the answer, and to the final text.

    python bench/slack_bench.py [--threads 20] [--channels 4] [--chars 3000] [--stream-s 12]
                                [--streaming native|update|both]
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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.providers.scripted import Reply, ScriptedProvider
from bench.percentiles import ms
from bot.runtime.app import App
from bot.runtime.config import load_config
from tests.slack_events import BOT_USER, envelope, message
from tests.slack_fake import APP_TOKEN, BOT_TOKEN, Call, FakeSlack

WRITES = (
    "chat.postMessage",
    "chat.update",
    "chat.startStream",
    "chat.appendStream",
    "chat.stopStream",
)


async def run(
    threads: int, channels: int, chars: int, stream_s: float, per_minute: float, streaming: str
) -> None:
    fake = FakeSlack(updates_per_minute=per_minute)
    await fake.start()
    answer = " ".join(f"w{i:04d}" for i in range(chars // 6 + 1))[:chars]
    pieces = max(1, int(stream_s / 0.1))
    provider = ScriptedProvider(
        lambda request: Reply(answer, chunks=pieces, delay_s=stream_s / pieces)
    )
    with tempfile.TemporaryDirectory() as data:
        path = Path(data) / "config.yaml"
        slack = {"enabled": True, "api_base": fake.url, "streaming": streaming}
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
    print(f"channels.slack.streaming: {streaming}")
    _report(fake, asked, answer, wall, threads, channels, chars, stream_s, per_minute)


def _thread_of_call(call: Call, thread_of: dict[tuple[str, str], Any]) -> Any:
    channel = call.params.get("channel")
    if call.method in ("chat.postMessage", "chat.startStream"):
        return (channel, call.params.get("thread_ts"))
    return thread_of.get((str(channel), str(call.params.get("ts"))))


def _visible(call: Call) -> str:
    """The answer's text a call put on the screen (a stream's chunks, a post's or update's text)."""
    chunks = call.params.get("chunks") or []
    return "".join(c.get("text", "") for c in chunks if c.get("type") == "markdown_text") or str(
        call.params.get("text") or ""
    )


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
    thread_of: dict[tuple[str, str], Any] = {
        (m.channel, m.ts): (m.channel, m.thread_ts) for m in fake.bot_messages()
    }
    first_word = answer.split()[0]
    calls: dict[Any, list[Call]] = {}
    for call in fake.ok(*WRITES):
        calls.setdefault(_thread_of_call(call, thread_of), []).append(call)
    placeholder: list[float] = []
    final: list[float] = []
    edits: list[int] = []
    parts: list[int] = []
    complete = 0
    first_streamed: list[float] = []
    first: list[float] = []
    for key, at in asked.items():
        mine = calls.get(key, [])
        placeholder.append(mine[0].at - at)
        seen = next(c.at for c in mine if first_word in _visible(c)) - at
        (first_streamed if mine[0].method == "chat.startStream" else first).append(seen)
        final.append(max(c.at for c in mine) - at)
        edits.append(len(mine) - 1)
        shown = fake.thread(*key)
        parts.append(len(shown))
        complete += " ".join(shown).split() == answer.split()
    placeholder.sort()
    first.sort()
    first_streamed.sort()
    final.sort()
    updates_all = fake.ok("chat.update")
    span = (updates_all[-1].at - updates_all[0].at) if len(updates_all) > 1 else 0.0
    streamed = sum(m.streamed for m in fake.bot_messages())
    print(
        f"Slack: {threads} threads in one workspace ({channels} channel(s)) x one {chars}-character "
        f"answer streamed over {stream_s:g} s; the fake allows {per_minute:g} chat.update/min "
        "per workspace (burst 5), 1 post/s per channel (burst 10), 100 appendStream/min and "
        "20 startStream/min and stopStream/min"
    )
    print(
        f"  native streams                 : {streamed} answers "
        f"({len(fake.ok('chat.appendStream'))} appends, {len(fake.ok('chat.stopStream'))} stops)"
    )
    print(f"  answers complete and in order  : {complete}/{threads}")
    print(f"  messages per answer            : {min(parts)}..{max(parts)}")
    print(
        f"  calls per answer after the first: min {min(edits)}, mean {statistics.mean(edits):.1f}, "
        f"max {max(edits)} ({len(updates_all)} chat.update in all, "
        f"{len(updates_all) / span * 60 if span else 0:.1f}/min over {span:.0f} s)"
    )
    print(f"  ratelimited (429) from the fake: {len(fake.ratelimited)}")
    print(
        f"  event -> placeholder           : p50 {ms(placeholder, 0.5)} ms, "
        f"max {placeholder[-1] * 1000:.1f} ms"
    )
    for label, values in (("streamed", first_streamed), ("posted+updated", first)):
        if values:
            print(
                f"  event -> first visible token   : p50 {ms(values, 0.5)} ms, "
                f"max {values[-1] * 1000:.1f} ms ({len(values)} {label})"
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
    parser.add_argument("--streaming", choices=["native", "update", "both"], default="both")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    modes = ["native", "update"] if args.streaming == "both" else [args.streaming]
    for mode in modes:
        asyncio.run(
            run(args.threads, args.channels, args.chars, args.stream_s, args.per_minute, mode)
        )


if __name__ == "__main__":
    main()
