"""Stop means stop: every kind of stop ends the work of the turn, not only what is shown.

A turn of tests/stop_kit.py runs the coordinator's slow MCP call, a background specialist in a
slow MCP call and a foreground specialist whose model stream the fake provider holds open. A
stop — the widget's stop frame, `/stop` typed on the web socket, the sessions API's stop,
`/stop` on Telegram and on Feishu, `stop` in a Slack DM, each platform's real SDK client on its
fake — must close that model stream (the fake sees the connection closed),
cancel both MCP calls on the server (it logs them cancelled), kill both specialists, ask the
model nothing more and end the placeholder as stopped.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.pipeline.turn import STOPPED
from bot.runtime.app import App
from tests.api_kit import KEY_A, ApiClient, Event, api_section, read_events
from tests.conftest import connect, db_rows, make_config, settled
from tests.feishu_events import message_event
from tests.feishu_fake import APP_ID, APP_SECRET, FakeFeishu
from tests.slack_events import envelope
from tests.slack_events import message as slack_message
from tests.slack_fake import APP_TOKEN, FakeSlack
from tests.slack_fake import BOT_TOKEN as SLACK_BOT_TOKEN
from tests.stop_kit import STREAMED, WAIT_S, StopModel, log_count, sections
from tests.telegram_fake import TOKEN, FakeBotAPI
from tests.test_mcp_servers import logged

pytestmark = [pytest.mark.process, pytest.mark.timeout(180)]

KINDS = ["widget", "command", "api", "telegram", "slack", "feishu"]
USER_CHAT = 4242  # the Telegram user's private chat


class Surface:
    """Where the user asks and stops: `ask` starts the turn, `stop` stops it, `final` is the
    placeholder's last text and whether the channel marked it stopped (None: it cannot)."""

    ask: Callable[[str], Awaitable[None]]
    stop: Callable[[], Awaitable[None]]
    final: Callable[[], Awaitable[tuple[str, bool | None]]]
    showing: Callable[[str], Awaitable[None]]  # until the placeholder shows this text
    history: Callable[[], Awaitable[list[dict[str, Any]]]] | None = None  # the API's transcript


@pytest.fixture
async def fakes() -> AsyncIterator[list[FakeBotAPI | FakeSlack | FakeFeishu]]:
    """The platform fakes a test started: closed after its apps stopped."""
    started: list[FakeBotAPI | FakeSlack | FakeFeishu] = []
    yield started
    for fake in started:
        await fake.close()


@pytest.fixture
async def started(fakes: list[FakeBotAPI | FakeSlack | FakeFeishu]) -> AsyncIterator[list[App]]:
    apps: list[App] = []
    yield apps
    for app in apps:
        await app.stop()


async def start(
    kind: str,
    started: list[App],
    tmp_path: Path,
    model: StopModel,
    session: aiohttp.ClientSession,
    fakes: list[FakeBotAPI | FakeSlack | FakeFeishu],
) -> tuple[App, Surface]:
    log = tmp_path / "mcp.log"
    config = sections(tmp_path, model, log)
    fake: FakeBotAPI | None = None
    if kind == "api":
        config["channels"] = api_section()
    if kind == "telegram":
        fake = FakeBotAPI(interval_s=0.05)
        await fake.start()
        fakes.append(fake)
        telegram = {"enabled": True, "token": TOKEN, "api_base": fake.url}
        config["channels"] = {"telegram": telegram | {"private_edit_interval_s": 0.05}}
        config["server"] = {"public_url": "https://bot.example.com"}
    if kind == "feishu":
        lark = FakeFeishu()
        await lark.start()
        fakes.append(lark)
        section = {"enabled": True, "app_id": APP_ID, "app_secret": APP_SECRET}
        config["channels"] = {"feishu": section | {"domain": lark.url}}
    if kind == "slack":
        slack = FakeSlack()
        await slack.start()
        fakes.append(slack)
        config["channels"] = {
            "slack": {
                "enabled": True,
                "bot_token": SLACK_BOT_TOKEN,
                "app_token": APP_TOKEN,
                "api_base": slack.url,
                "edit_interval_s": 0.1,
            }
        }
    app = App(make_config(tmp_path, **config), base_dir=tmp_path)
    await app.__aenter__()
    started.append(app)
    async with asyncio.timeout(WAIT_S):
        await app.mcp.servers["demo"].wait_for(lambda s: s.ready)
    surface = Surface()
    if kind in ("widget", "command"):
        client = await connect(session, app)
        await client.hello()

        async def ask(text: str) -> None:
            await client.send(type="message", text=text)

        async def stop() -> None:
            if kind == "widget":
                await client.send(type="stop")
            else:
                await client.send(type="message", text="/stop")

        async def final() -> tuple[str, bool | None]:
            frame = await client.until_type("message.completed", timeout=WAIT_S)
            return frame["text"], frame.get("stopped", False)

        async def showing(text: str) -> None:
            await client.until(
                lambda f: f["type"] == "message.updated" and text in f["text"], timeout=WAIT_S
            )

    elif kind == "api":
        api = ApiClient(session, app, KEY_A)
        sid = await api.new_session()
        asked: list[asyncio.Task[None]] = []
        events: list[Event] = []
        changed = asyncio.Event()

        async def follow(text: str) -> None:
            url = f"{api.base}/sessions/{sid}/messages"
            async with api.http.post(url, json={"text": text}, headers=api.headers()) as response:
                async for item in read_events(response):
                    if item is not None:
                        events.append(item)
                        changed.set()

        async def ask(text: str) -> None:
            asked.append(asyncio.create_task(follow(text)))

        async def stop() -> None:
            assert (await api.call("POST", f"/sessions/{sid}/stop"))[0] == 202

        async def final() -> tuple[str, bool | None]:
            await asyncio.wait_for(asked[0], WAIT_S)
            done = [e.data for e in events if e.type == "message.completed"][-1]
            return done["text"], done.get("stopped", False)

        async def history() -> list[dict[str, Any]]:
            status, page = await api.call("GET", f"/sessions/{sid}/messages")
            assert status == 200, page
            return list(page["messages"])

        surface.history = history

        async def showing(text: str) -> None:
            async with asyncio.timeout(WAIT_S):
                while not any(
                    e.type == "message.updated" and text in e.data["text"] for e in events
                ):
                    changed.clear()
                    await changed.wait()

    elif kind == "slack":
        await slack.wait_for(lambda: slack.connected > 0)

        async def ask(text: str) -> None:
            await slack.push("events_api", envelope(slack_message(text, channel="D1")))

        async def stop() -> None:  # a DM that is just "stop" is the command
            await slack.push("events_api", envelope(slack_message("stop", channel="D1")))

        def slack_shown() -> list[str]:
            return [m.text for m in slack.bot_messages("D1")]

        async def final() -> tuple[str, bool | None]:
            await slack.wait_for(lambda: any(STOPPED in t for t in slack_shown()), timeout=WAIT_S)
            return next(t for t in slack_shown() if STOPPED in t), None

        async def showing(text: str) -> None:
            await slack.wait_for(lambda: any(text in t for t in slack_shown()), timeout=WAIT_S)

    elif kind == "feishu":
        await lark.ws.wait_connected()

        async def ask(text: str) -> None:
            await lark.ws.push(message_event(text))

        async def stop() -> None:
            await lark.ws.push(message_event("/stop"))

        def lark_shown() -> list[str]:
            return [lark.text_of(m) for m in lark.bot_messages("oc_p2p")]

        async def final() -> tuple[str, bool | None]:
            await lark.wait_for(lambda: any(STOPPED in t for t in lark_shown()), timeout=WAIT_S)
            return next(t for t in lark_shown() if STOPPED in t), None

        async def showing(text: str) -> None:
            await lark.wait_for(lambda: any(text in t for t in lark_shown()), timeout=WAIT_S)

    else:
        assert fake is not None
        bot = fake

        async def ask(text: str) -> None:
            bot.push(bot.message(USER_CHAT, text))

        async def stop() -> None:
            entities = [{"type": "bot_command", "offset": 0, "length": 5}]
            bot.push(bot.message(USER_CHAT, "/stop", entities=entities))

        async def final() -> tuple[str, bool | None]:
            await bot.wait_for(lambda: any(STOPPED in t for t in shown(bot)), timeout=WAIT_S)
            return next(t for t in shown(bot) if STOPPED in t), None

        async def showing(text: str) -> None:
            await bot.wait_for(lambda: any(text in t for t in shown(bot)), timeout=WAIT_S)

    surface.ask, surface.stop, surface.final, surface.showing = ask, stop, final, showing
    return app, surface


def shown(fake: FakeBotAPI) -> list[str]:
    return [fake.messages[(USER_CHAT, c.message_id)] for c in fake.ok(USER_CHAT, "sendMessage")]  # type: ignore[index]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_stop_ends_the_model_call_the_tools_and_the_specialists(
    kind: str,
    started: list[App],
    fakes: list[FakeBotAPI | FakeSlack | FakeFeishu],
    tmp_path: Path,
    session: aiohttp.ClientSession,
) -> None:
    log = tmp_path / "mcp.log"
    async with StopModel("work") as model:
        app, surface = await start(kind, started, tmp_path, model, session, fakes)
        await surface.ask("do all the work")
        await logged(log, "slow started")  # the coordinator's call
        await model.wait_requests(3, timeout=WAIT_S)  # coordinator, alpha, beta
        async with asyncio.timeout(WAIT_S):  # alpha's call too
            while log_count(log, "slow started") < 2:  # noqa: ASYNC110 (a child's log)
                await asyncio.sleep(0.02)
        assert not model.closed  # beta's stream is held open
        await surface.stop()

        await model.wait_closed(1, timeout=WAIT_S)  # beta's model stream closed
        async with asyncio.timeout(WAIT_S):  # both MCP calls cancelled on the server
            while log_count(log, "cancelled slow") < 2:  # noqa: ASYNC110 (a child's log)
                await asyncio.sleep(0.02)
        text, marked = await surface.final()
        assert text == STOPPED and marked in (True, None)
        await settled(app)
        statuses = {t.subagent_type: t.status for t in app.workers.tasks.values()}
        assert statuses == {"specialist-alpha": "killed", "specialist-beta": "killed"}
        assert sorted(model.asked) == ["alpha", "beta", "coordinator"]  # nothing more
        assert db_rows(app, "select status from turns") == [("stopped",)]
        # beta's call was cut before the provider reported usage: only what it streamed
        # (an estimate) counts; the coordinator's and alpha's calls count as reported
        rows = sorted(db_rows(app, "select input_tokens, output_tokens from usage"))
        assert len(rows) == 3 and rows.count((12, 7)) == 2, rows
        (prompt, written) = next(row for row in rows if row != (12, 7))
        assert prompt > 0 and written == len("Beta is thinking") // 4


@pytest.mark.parametrize("kind", KINDS)
async def test_a_stopped_answer_keeps_what_it_showed_with_a_stopped_mark(
    kind: str,
    started: list[App],
    fakes: list[FakeBotAPI | FakeSlack | FakeFeishu],
    tmp_path: Path,
    session: aiohttp.ClientSession,
) -> None:
    async with StopModel("answer") as model:
        app, surface = await start(kind, started, tmp_path, model, session, fakes)
        await surface.ask("answer me")
        await model.wait_requests(1, timeout=WAIT_S)
        streamed = "".join(STREAMED)
        await surface.showing(streamed)  # the text reached the user
        await surface.stop()
        await model.wait_closed(1, timeout=WAIT_S)
        text, marked = await surface.final()
        assert text == f"{streamed}\n\n{STOPPED}"
        assert marked in (True, None)
        if surface.history is not None:  # the API's transcript keeps it, marked stopped
            answers = [m for m in await surface.history() if m["role"] == "assistant"]
            assert [(m["text"], m["status"]) for m in answers] == [(text, "stopped")]
        await settled(app)
        assert model.asked == ["coordinator"]
        ((prompt, written),) = db_rows(app, "select input_tokens, output_tokens from usage")
        assert prompt > 0 and written == len(streamed) // 4  # what it used, estimated
