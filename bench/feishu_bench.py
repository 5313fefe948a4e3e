"""Benchmark: concurrent Feishu chats streaming long answers into CardKit cards against a fake.

The real gateway and the real lark-oapi clients (the long connection in, the Open API out) talk to
tests/feishu_fake.py, which enforces Feishu's rules: a strictly increasing `sequence` per card,
at most `--card-rate` updates a second per card, 50 calls a second per app and 5 sends a second per
chat (a rate-limit error past any of them). A scripted model calls `--tools` tools (each a line in the card), then streams the answer in pieces.
Prints the rate-limit errors (the goal is zero), messages sent per turn (the goal is one card),
card operations per turn (element content writes, whole-card updates, settings calls), the time
from the event to the placeholder card, to the first visible token (the first card write that
holds answer text) and to the final (streaming off), and whether every card ended with streaming
mode off and holds the whole answer.

    python bench/feishu_bench.py [--chats 20] [--chars 3000] [--stream-s 8] [--card-rate 10]
                                 [--tools 3]
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

from adapters.feishu.render import to_card_markdown
from agent.providers.scripted import Reply, ScriptedProvider
from agent.types import ModelRequest
from bench.percentiles import ms
from bot.runtime.app import App
from bot.runtime.config import load_config
from tests.feishu_events import message_event
from tests.feishu_fake import APP_ID, APP_SECRET, Call, FakeFeishu

RATE_CODES = {99991400, 230020, 11232}


async def run(chats: int, chars: int, stream_s: float, card_rate: float, tools: int) -> None:
    fake = FakeFeishu(card_per_s=card_rate)
    await fake.start()
    answer = " ".join(f"w{i:04d}" for i in range(chars // 6 + 1))[:chars]
    pieces = max(1, int(stream_s / 0.1))
    calls: list[tuple[str, dict[str, object]]] = [("get_current_datetime", {})] * tools

    def reply(request: ModelRequest) -> Reply:
        if calls and request.messages[-1].role != "tool":  # the turn's first call: the tools
            return Reply(calls=calls)
        return Reply(answer, chunks=pieces, delay_s=stream_s / pieces)

    provider = ScriptedProvider(reply)
    with tempfile.TemporaryDirectory() as data:
        path = Path(data) / "config.yaml"
        feishu = {
            "enabled": True,
            "app_id": "${FEISHU_APP_ID}",
            "app_secret": "${FEISHU_APP_SECRET}",
            "domain": fake.url,
        }
        path.write_text(
            json.dumps(
                {
                    "server": {"port": 0},
                    "storage": {"path": str(Path(data) / "bench.db")},
                    "personas": {"dirs": [str(ROOT / "personas")]},
                    "channels": {"feishu": feishu, "websocket": {"enabled": False}},
                }
            )
        )
        env = {"FEISHU_APP_ID": APP_ID, "FEISHU_APP_SECRET": APP_SECRET}
        config = load_config(path, env=env)
        async with App(config, base_dir=Path(data), provider=provider) as app:
            await fake.ws.wait_connected()
            started = time.monotonic()
            asked: dict[str, float] = {}
            for n in range(chats):
                asked[f"om_b{n}"] = time.monotonic()
                event = message_event(
                    "tell me everything", chat_id=f"oc_b{n}", message_id=f"om_b{n}"
                )
                await fake.ws.push(event)
            await provider.wait_requests(chats)
            await app.gateway.wait_idle()  # every turn done: its final landed
            wall = time.monotonic() - started
        await fake.close()
    _report(fake, asked, answer, wall, chats, chars, stream_s, card_rate)


def _report(
    fake: FakeFeishu,
    asked: dict[str, float],
    answer: str,
    wall: float,
    chats: int,
    chars: int,
    stream_s: float,
    card_rate: float,
) -> None:
    replies = {c.path.split("/")[-2]: c for c in fake.of("message", ok=True)}
    cards = {
        c.path.split("/")[-2]: json.loads(c.body["content"])["data"]["card_id"]
        for c in replies.values()
    }
    placeholder = sorted(replies[q].at - asked[q] for q in asked if q in replies)
    finals, updates, first_token = [], [], []
    ops = fake.of("content", "settings", "card_update", ok=True)
    first_word = answer.split()[0]
    for question, card_id in cards.items():
        calls = [c for c in ops if c.path.split("/")[5] == card_id]
        updates.append(len(calls))
        closes = [c for c in calls if c.kind == "settings"]
        if closes:
            finals.append(closes[-1].at - asked[question])
        shown = [c for c in calls if first_word in _written(c)]
        if shown:
            first_token.append(shown[0].at - asked[question])
    finals.sort()
    first_token.sort()
    sent = len(fake.of("message", ok=True))
    limited = [c for c in fake.calls if c.code in RATE_CODES]
    other = [c for c in fake.calls if c.code not in RATE_CODES | {0}]
    ended = sum(not fake.cards[card_id].streaming for card_id in cards.values())
    whole = to_card_markdown(answer)
    complete = sum(
        fake.cards[card_id].card["body"]["elements"][0]["content"] == whole
        for card_id in cards.values()
    )
    print(
        f"Feishu: {chats} chats x one {chars}-character answer streamed over {stream_s:.0f} s "
        f"into CardKit cards; the fake allows {card_rate:g} updates/s per card, 50 calls/s per app"
    )
    print(f"  rate-limit errors             : {len(limited)} (other errors: {len(other)})")
    print(
        f"  cards ending streaming off    : {ended}/{chats}; holding the whole answer: {complete}/{chats}"
    )
    tooled = sum(
        any(e.get("element_id") == "tools" for e in fake.cards[c].card["body"]["elements"])
        for c in cards.values()
    )
    print(f"  cards showing the tools' lines: {tooled}/{chats}")
    print(f"  messages sent per turn        : {sent / chats:.2f} (one card each: 1.00)")
    print(
        f"  card operations per turn      : min {min(updates)}, mean {statistics.mean(updates):.1f}, "
        f"max {max(updates)} (content writes, whole-card updates, settings calls)"
    )
    print(
        f"  event -> placeholder card     : p50 {ms(placeholder, 0.5, digits=0)} ms, max {ms(placeholder, 1.0, digits=0)} ms"
    )
    print(
        f"  event -> first visible token  : p50 {ms(first_token, 0.5, digits=0)} ms, max {ms(first_token, 1.0, digits=0)} ms "
        "(the first card write holding answer text)"
    )
    print(
        f"  event -> final (streaming off): p50 {ms(finals, 0.5, digits=0)} ms, max {ms(finals, 1.0, digits=0)} ms "
        f"(the answer itself streams for {stream_s:.0f} s)"
    )
    print(f"  calls to the fake             : {len(fake.calls)} in {wall:.1f} s wall time")


def _written(call: Call) -> str:
    """The text a card call wrote: an element's content, or a whole card's JSON."""
    if call.kind == "content":
        return str(call.body.get("content", ""))
    if call.kind == "card_update":
        return str(call.body["card"]["data"])
    return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--chars", type=int, default=3000, help="length of each answer")
    parser.add_argument("--stream-s", type=float, default=8.0, help="how long each answer streams")
    parser.add_argument(
        "--card-rate", type=float, default=10.0, help="updates/s per card the fake allows"
    )
    parser.add_argument(
        "--tools", type=int, default=3, help="tool calls before each answer (lines in the card)"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    asyncio.run(run(args.chats, args.chars, args.stream_s, args.card_rate, args.tools))


if __name__ == "__main__":
    main()
