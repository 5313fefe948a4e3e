"""Benchmark: how fast a stop stops the work, from the press to what the fakes observe.

Each run is the turn of tests/stop_kit.py: the coordinator's slow MCP call (the demo server over
stdio), a background specialist in a slow MCP call, a foreground specialist whose model stream
the fake OpenAI server holds open (the real SDK streams from it). Once all of it runs, the user
stops it, and the run measures from the press to:

  (a) closed     the fake model server saw the held stream's connection closed;
  (b) killed     the last of the two specialists' tasks ended (cancelled);
  (c) marked     the user's client saw the answer end stopped: the widget's `message.completed`
                 with `stopped: true`, or on Telegram the message with the stop mark that
                 replaces the turn's live draft (the fake Bot API's record of it). That message
                 keeps to Telegram's one call a second per chat (the fake answers 429 past it):
                 pressed within a second of the chat's last call, it waits for the budget.
                 Rows marked `*` are runs pressed once the chat was a second quiet: the
                 gateway's own delay.

for the widget (its `stop` frame on the web socket), for `/stop` typed in a private Telegram chat
(`telegram`) and for the stop button of the turn's draft (`tg-button`: the
`stopped_message_generation` update), the real aiogram client against tests/telegram_fake.py,
long polling; for the stop button of a Slack agent session (`agent_session_stopped`, the real
bolt app over Socket Mode against tests/slack_fake.py) and for the stop button of a Feishu turn
card (a card action over the long connection, the real lark-oapi client against
tests/feishu_fake.py). Prints p50 and p99 per channel and measure; the goal is 200 ms p99 for
each.

    python bench/stop_bench.py [--runs 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.percentiles import ms
from bot.pipeline.turn import STOPPED
from bot.runtime.app import App
from bot.runtime.config import load_config
from tests.feishu_events import action_event, message_event
from tests.feishu_fake import APP_ID, APP_SECRET, FakeFeishu
from tests.slack_events import envelope, message, new_ts
from tests.slack_fake import APP_TOKEN, BOT_TOKEN, FakeSlack
from tests.stop_kit import StopModel, log_count, sections
from tests.telegram_fake import TOKEN, FakeBotAPI

GOAL_MS = 200.0
ORIGIN = "http://127.0.0.1:8080"
MEASURES = ("closed", "killed", "marked")

Press = Callable[[], Awaitable[Callable[[], Awaitable[float]]]]


class Bench:
    def __init__(self, app: App, model: StopModel, log: Path) -> None:
        self.app, self.model, self.log = app, model, log

    async def run(
        self,
        start: Callable[[], Awaitable[None]],
        press: Press,
        before: Callable[[], Awaitable[None]] | None = None,
    ) -> tuple[float, ...]:
        """One turn started, stopped once all its work runs (and `before` returned); the three
        delays in seconds."""
        model, requests, closed = self.model, len(self.model.requests), len(self.model.closed)
        slow = log_count(self.log, "slow started")
        await start()
        await model.wait_requests(requests + 3, timeout=60)
        async with asyncio.timeout(60):
            while log_count(self.log, "slow started") < slow + 2:  # noqa: ASYNC110 (a child's log)
                await asyncio.sleep(0.005)
        tasks = [
            t.task for t in self.app.workers.tasks.values() if t.status == "running" and t.task
        ]
        assert len(tasks) == 2, tasks
        ended: list[float] = []
        for task in tasks:
            task.add_done_callback(lambda _: ended.append(time.monotonic()))
        if before is not None:
            await before()
        pressed = time.monotonic()
        marked = await press()
        seen = await marked()
        await model.wait_closed(closed + 1, timeout=60)
        await asyncio.wait(tasks)
        await self.app.gateway.wait_idle()
        return model.closed[closed] - pressed, max(ended) - pressed, seen - pressed


async def widget(bench: Bench, session: aiohttp.ClientSession) -> tuple[float, ...]:
    ws = await session.ws_connect(f"{bench.app.url}/ws", headers={"Origin": ORIGIN})
    try:
        await ws.send_json({"type": "hello", "visitor_id": f"bench-{uuid.uuid4().hex[:12]}"})
        while (await ws.receive_json())["type"] != "ready":
            pass

        async def start() -> None:
            await ws.send_json({"type": "message", "text": "do all the work"})

        async def press() -> Callable[[], Awaitable[float]]:
            await ws.send_json({"type": "stop"})

            async def marked() -> float:
                while True:
                    frame = await ws.receive_json(timeout=60)
                    if frame["type"] == "message.completed" and frame.get("stopped"):
                        return time.monotonic()

            return marked

        return await bench.run(start, press)
    finally:
        await ws.close()


async def telegram(
    bench: Bench, fake: FakeBotAPI, chat: int, *, budget_free: bool = False, button: bool = False
) -> tuple[float, ...]:
    """`budget_free`: pressed once the chat's last call is a second old, so the stop's message
    need not wait for Telegram's one call a second per chat (the gateway keeps to it).
    `button`: the draft's stop button, else `/stop` typed."""

    async def quiet() -> None:
        while time.monotonic() - fake.to_chat(chat)[-1].at < fake.interval_s + 0.05:  # noqa: ASYNC110
            await asyncio.sleep(0.01)

    async def start() -> None:
        fake.push(fake.message(chat, "do all the work"))

    async def press() -> Callable[[], Awaitable[float]]:
        if button:
            draft = fake.ok(chat, "sendMessageDraft")[-1].params["draft_id"]
            fake.push(fake.stop_press(chat, draft))
        else:
            entities = [{"type": "bot_command", "offset": 0, "length": 5}]
            fake.push(fake.message(chat, "/stop", entities=entities))

        async def marked() -> float:
            await fake.wait_for(
                lambda: any(
                    c == chat and STOPPED in text for (c, _), text in fake.messages.items()
                ),
                timeout=60,
            )
            return time.monotonic()

        return marked

    return await bench.run(start, press, quiet if budget_free else None)


async def slack(bench: Bench, fake: FakeSlack, channel: str) -> tuple[float, ...]:
    """A DM under Slack's agent view: the agent session's stop button (Slack ends the thread's
    streams, then sends `agent_session_stopped`)."""
    said = message("do all the work", channel=channel)

    async def start() -> None:
        await fake.push("events_api", envelope(said))

    async def press() -> Callable[[], Awaitable[float]]:
        stopped = fake.stop_streams(channel, said["ts"])
        event = {
            "type": "agent_session_stopped",
            "channel": channel,
            "user": "U1",
            "thread_ts": said["ts"],
            "streaming_message_ts": stopped,
            "event_ts": new_ts(),
        }
        await fake.push("events_api", envelope(event))

        async def marked() -> float:
            await fake.wait_for(
                lambda: any(STOPPED in text for text in fake.thread(channel, said["ts"])), 60
            )
            return time.monotonic()

        return marked

    return await bench.run(start, press)


async def feishu(bench: Bench, fake: FakeFeishu, chat: str) -> tuple[float, ...]:
    """A private chat: the stop button on the turn's card."""

    async def start() -> None:
        await fake.ws.push(message_event("do all the work", chat_id=chat))

    async def press() -> Callable[[], Awaitable[float]]:
        [card] = fake.bot_messages(chat)
        stop = next(
            e for e in fake.card_of(card)["body"]["elements"] if e.get("element_id") == "stop"
        )
        value = stop["behaviors"][0]["value"]
        await fake.ws.push(action_event(value, chat_id=chat, message_id=card.message_id))

        async def marked() -> float:
            await fake.wait_for(lambda: STOPPED in fake.text_of(card), 60)
            return time.monotonic()

        return marked

    async def button() -> None:  # the card is out with its button (the work started first)
        await fake.wait_for(lambda: bool(fake.bot_messages(chat)), 60)

    return await bench.run(start, press, button)


async def main(runs: int) -> None:
    logging.basicConfig(level=logging.ERROR)
    fake = FakeBotAPI(drafts=True)  # Telegram's own limits: one call a second per chat
    await fake.start()
    slack_fake, feishu_fake = FakeSlack(), FakeFeishu()  # their rate limits too
    await slack_fake.start()
    await feishu_fake.start()
    try:
        async with StopModel("work") as model:
            with tempfile.TemporaryDirectory() as data:
                folder, log = Path(data), Path(data) / "mcp.log"
                config = sections(folder, model, log)
                config["channels"] = {
                    "websocket": {"rate_limit_per_minute": 100_000},
                    "telegram": {"enabled": True, "token": TOKEN, "api_base": fake.url},
                    "slack": {
                        "enabled": True,
                        "bot_token": BOT_TOKEN,
                        "app_token": APP_TOKEN,
                        "api_base": slack_fake.url,
                        "agent_view": True,
                    },
                    "feishu": {
                        "enabled": True,
                        "app_id": APP_ID,
                        "app_secret": APP_SECRET,
                        "domain": feishu_fake.url,
                    },
                }
                config["server"] = {"port": 0, "public_url": "https://bot.example.com"}
                config["storage"] = {"path": str(folder / "bench.db")}
                path = folder / "config.yaml"
                path.write_text(json.dumps(config))
                app = App(load_config(path, env={}), base_dir=folder)
                async with app, aiohttp.ClientSession() as session:
                    await app.mcp.servers["demo"].wait_for(lambda s: s.ready)
                    await slack_fake.wait_for(lambda: slack_fake.connected > 0, 60)
                    await feishu_fake.ws.wait_connected()
                    bench = Bench(app, model, log)
                    results: dict[str, list[tuple[float, ...]]] = {
                        "widget": [],
                        "telegram": [],
                        "telegram*": [],
                        "tg-button": [],
                        "tg-button*": [],
                        "slack": [],
                        "feishu": [],
                    }
                    for n in range(runs):
                        results["widget"].append(await widget(bench, session))
                        results["telegram"].append(await telegram(bench, fake, 5000 + n))
                        results["telegram*"].append(
                            await telegram(bench, fake, 9000 + n, budget_free=True)
                        )
                        results["tg-button"].append(
                            await telegram(bench, fake, 13000 + n, button=True)
                        )
                        results["tg-button*"].append(
                            await telegram(bench, fake, 17000 + n, budget_free=True, button=True)
                        )
                        results["slack"].append(await slack(bench, slack_fake, f"D{n}"))
                        results["feishu"].append(await feishu(bench, feishu_fake, f"oc_{n}"))
                    report(results, runs)
    finally:
        await fake.close()
        await slack_fake.close()
        await feishu_fake.close()


def report(results: dict[str, list[tuple[float, ...]]], runs: int) -> None:
    print(f"stop -> work ended, {runs} runs per channel (goal: p99 <= {GOAL_MS:.0f} ms)")
    print(f"{'channel':<10} {'measure':<8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}  goal")
    for channel, rows in results.items():
        for index, measure in enumerate(MEASURES):
            values = sorted(row[index] for row in rows)
            p99 = values[min(len(values) - 1, int(0.99 * len(values)))] * 1000
            verdict = "ok" if p99 <= GOAL_MS else "MISSED"
            print(
                f"{channel:<10} {measure:<8} {ms(values, 0.5):>8} {ms(values, 0.99):>8} "
                f"{ms(values, 1.0):>8}  {verdict}"
            )
    print(
        "telegram:  /stop typed; tg-button: the draft's stop button (stopped_message_generation)\n"
        "pressed whenever the work runs, the stop's message waits for the chat's budget "
        "(Telegram: one call a second per chat, shared by drafts, typing and finals);\n"
        "*: pressed once the chat's last call was a second old: the gateway's own part"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    asyncio.run(main(parser.parse_args().runs))
