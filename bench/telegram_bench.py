"""Benchmark: concurrent Telegram chats streaming long answers against a fake Bot API.

The real gateway and the real aiogram client (long polling) talk to tests/telegram_fake.py, which
enforces Telegram's limit of one message or edit per second per chat (429 + retry_after past it).
A scripted model streams each answer in pieces. The chats are private: with `--drafts auto` (the
default, as in production) each answer streams as a live draft and lands as one message; with
`--drafts off` a placeholder message is edited. Prints previews (drafts or edits) per answer, the
highest call rate seen in any one chat, the number of 429s (the target is zero), and the time to
the first visible token: from the user's message to the first preview showing answer text.

    python bench/telegram_bench.py [--chats 20] [--chars 3000] [--stream-s 8] [--interval 1.0]
                                   [--drafts auto|off]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
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
from tests.telegram_fake import TOKEN, Call, FakeBotAPI

PREVIEWS = ("sendMessageDraft", "editMessageText")
RATED = ("sendmessage", "sendmessagedraft", "editmessagetext", "sendchataction")


async def run(chats: int, chars: int, stream_s: float, interval: float, drafts: str) -> None:
    fake = FakeBotAPI(interval_s=interval, drafts=True)
    await fake.start()
    answer = " ".join(f"w{i:04d}" for i in range(chars // 6 + 1))[:chars]
    pieces = max(1, int(stream_s / 0.1))
    provider = ScriptedProvider(
        lambda request: Reply(answer, chunks=pieces, delay_s=stream_s / pieces)
    )
    with tempfile.TemporaryDirectory() as data:
        path = Path(data) / "config.yaml"
        path.write_text(
            json.dumps(
                {
                    "server": {"port": 0},
                    "storage": {"path": str(Path(data) / "bench.db")},
                    "personas": {"dirs": [str(ROOT / "personas")]},
                    "channels": {
                        "telegram": {
                            "enabled": True,
                            "token": "${TELEGRAM_BOT_TOKEN}",
                            "api_base": fake.url,
                            "private_edit_interval_s": interval,
                            "drafts": drafts,
                        }
                    },
                }
            )
        )
        config = load_config(path, env={"TELEGRAM_BOT_TOKEN": TOKEN})
        async with App(config, base_dir=Path(data), provider=provider) as app:
            await fake.wait_for(lambda: any(c.method == "getupdates" for c in fake.calls))
            started = time.monotonic()
            ids = [1000 + n for n in range(chats)]
            asked = {chat: time.monotonic() for chat in ids}
            for chat in ids:
                fake.push(fake.message(chat, "tell me everything"))
            await provider.wait_requests(chats)
            await app.gateway.wait_idle()  # every turn done: its final landed
            wall = time.monotonic() - started
        await fake.close()
    _report(fake, ids, asked, answer, wall, chats, chars, stream_s, interval, drafts)


def _final(fake: FakeBotAPI, chat: int, answer: str) -> bool:
    shown = [fake.messages[(chat, c.message_id)] for c in fake.ok(chat, "sendMessage")]  # type: ignore[index]
    return " ".join(shown).split() == answer.split()


def _report(
    fake: FakeBotAPI,
    ids: list[int],
    asked: dict[int, float],
    answer: str,
    wall: float,
    chats: int,
    chars: int,
    stream_s: float,
    interval: float,
    drafts: str,
) -> None:
    edits = [len(fake.ok(chat, *PREVIEWS)) for chat in ids]
    sends = [len(fake.ok(chat, "sendMessage")) for chat in ids]
    actions = sum(len(fake.ok(chat, "sendChatAction")) for chat in ids)
    gaps, windows = [], []
    for chat in ids:
        calls = fake.ok(chat)
        gaps += [b.at - a.at for a, b in itertools.pairwise(calls)]
        windows.append(_busiest_second(calls, interval))
    placeholder = sorted(fake.ok(c, "sendMessage", *PREVIEWS)[0].at - asked[c] for c in ids)
    first_word = answer.split()[0]
    token = sorted(
        next(call.at for call in fake.ok(c, *PREVIEWS) if first_word in (call.text or ""))
        - asked[c]
        for c in ids
    )
    everywhere = _busiest_second([c for c in fake.calls if c.method in RATED])
    how = "live drafts, then one message" if drafts == "auto" else "one message edited"
    print(
        f"Telegram: {chats} private chats x one {chars}-character answer streamed over "
        f"{stream_s:.0f} s ({how}); the fake allows one call per {interval:g} s per chat"
    )
    print(f"  answers complete and in order : {sum(_final(fake, c, answer) for c in ids)}/{chats}")
    print(f"  messages per answer           : {min(sends)}..{max(sends)} (4096 UTF-16 units each)")
    print(
        f"  previews per answer           : min {min(edits)}, mean {statistics.mean(edits):.1f}, max {max(edits)}"
    )
    print(f"  typing actions (all chats)    : {actions}")
    print(
        f"  highest call rate in one chat : {1 / min(gaps):.2f}/s (shortest gap {min(gaps):.3f} s; "
        f"at most {max(windows)} call(s) in any {interval:g} s window)"
    )
    print(f"  busiest second, all chats     : {everywhere} calls")
    print(f"  429s from the fake            : {len(fake.rate_limited)}")
    print(
        f"  placeholder after the update  : p50 {ms(placeholder, 0.5)} ms, p99 {ms(placeholder, 0.99)} ms "
        "(includes the long-poll hand-off)"
    )
    print(
        f"  first visible token           : p50 {ms(token, 0.5)} ms, p99 {ms(token, 0.99)} ms "
        "(the first preview showing answer text)"
    )
    print(f"  wall time                     : {wall:.1f} s")


def _busiest_second(calls: list[Call], window: float = 1.0) -> int:
    times = sorted(c.at for c in calls)
    best, start = 0, 0
    for end, at in enumerate(times):
        while at - times[start] >= window:
            start += 1
        best = max(best, end - start + 1)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--chars", type=int, default=3000, help="length of each answer")
    parser.add_argument("--stream-s", type=float, default=8.0, help="how long each answer streams")
    parser.add_argument(
        "--interval", type=float, default=1.0, help="per-chat limit the fake enforces"
    )
    parser.add_argument("--drafts", choices=("auto", "off"), default="auto")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    asyncio.run(run(args.chats, args.chars, args.stream_s, args.interval, args.drafts))


if __name__ == "__main__":
    main()
