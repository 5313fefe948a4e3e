"""The routing step: the command table (and `/help` generated from it), then the conversation's
mode — a held conversation's messages are recorded and acknowledged, never the model's."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from adapters.base import ChatRef, InboundMessage
from agent.providers.scripted import Reply, ScriptedProvider
from bot.pipeline.commands import APP_HELP, CHAT_HELP, HELP, NEW_LINE, STOP_LINE
from bot.pipeline.conversation_state import Mode
from bot.pipeline.gateway import REFUSAL
from bot.pipeline.held import WAITING
from bot.pipeline.routing import CONVERSATION, IGNORE, REFUSE, CommandTable, DefaultAccess, Router
from bot.pipeline.routing import Reply as Say
from bot.redis.states import state_key
from bot.runtime.app import App
from tests.conftest import Running, make_config
from tests.fakes import RecordingChannel
from tests.redis_kit import URL, prefix

__all__ = ["prefix"]

CHAT = ChatRef("fake", "dm-1")


@dataclass(frozen=True, slots=True)
class Echo:
    """A command a later feature could add: one more row of the table."""

    name: str = "echo"
    help: str = "say it back"

    async def run(self, message: InboundMessage, reply: Say) -> None:
        await reply(message, message.text.removeprefix("/echo").strip())


def message(text: str, event: str, **fields: object) -> InboundMessage:
    return InboundMessage(CHAT, "u1", text, event, f"m-{event}", **fields)  # type: ignore[arg-type]


async def test_help_is_generated_from_the_table_and_a_new_row_joins_it() -> None:
    assert HELP == (
        "**Commands**\n"
        "/new — start a fresh conversation (the bot forgets this one)\n"
        "/stop — stop the answer in progress and drop queued messages\n"
        "/help — this list\n\n"
        "Anything else goes to the assistant."
    )
    said: list[str] = []

    async def reply(message: InboundMessage, text: str) -> None:
        said.append(text)

    table = CommandTable((Echo(),))
    assert table.names() == ["echo", "help"]
    command = table.get("help")
    assert command is not None
    await command.run(message("/help", "e"), reply)
    assert said == [HELP.replace(f"/new — {NEW_LINE}\n/stop — {STOP_LINE}", "/echo — say it back")]


def test_a_later_row_of_the_same_name_replaces_the_earlier_one() -> None:
    louder = Echo(help="say it back, louder")
    table = CommandTable((Echo(), louder))
    assert table.get("echo") is louder and table.names() == ["echo", "help"]


def test_the_route_is_decided_before_any_read() -> None:
    router = Router(DefaultAccess(allowed_users=frozenset({"u1"})), CommandTable((Echo(),)))
    assert router.route(message("hello", "e")) is CONVERSATION
    assert router.route(message("/echo hi", "e")).command == Echo()
    assert router.route(message("/help@bot", "e")).to == "command"
    assert router.route(message("/unknown", "e")) is CONVERSATION  # the model's to answer
    assert router.route(message("   ", "e")) is IGNORE
    stranger = InboundMessage(CHAT, "u2", "/help", "e")
    assert router.route(stranger) is REFUSE
    chatter = InboundMessage(ChatRef("fake", "g"), "u1", "hi", "e", is_group=True)
    assert router.route(chatter) is IGNORE


Start = Callable[[ScriptedProvider], Awaitable[tuple[App, RecordingChannel]]]


@pytest.fixture(params=["embedded", "redis"])
async def start(
    request: pytest.FixtureRequest, tmp_path: Path, running: Running, prefix: str
) -> AsyncIterator[Start]:
    """An app with a recording channel: embedded (the claim, the mode read and the enqueue one
    after another), or on Redis (all three in the queue's one script)."""
    apps: list[App] = []

    async def begin(provider: ScriptedProvider) -> tuple[App, RecordingChannel]:
        channel = RecordingChannel()
        if request.param == "redis":
            redis = {"url": URL, "prefix": prefix}
            return await running(provider, channels=[channel], redis=redis), channel
        app = App(
            make_config(tmp_path),
            base_dir=tmp_path,
            provider=provider,
            channels=[channel],
            web_server=False,
        )
        await app.__aenter__()
        apps.append(app)
        return app, channel

    yield begin
    for app in apps:
        await app.stop()


async def _set_mode(app: App, mode: Mode) -> None:
    await app.gateway.states.update(CHAT.key, lambda state: replace(state, mode=mode))


def _finals(channel: RecordingChannel) -> list[str]:
    return [c.text for c in channel.calls if c.final]


async def test_a_held_conversation_records_and_acknowledges_and_the_bot_reads_it_later(
    start: Start,
) -> None:
    provider = ScriptedProvider([Reply("welcome back")])
    app, channel = await start(provider)
    await _set_mode(app, "waiting")
    await app.gateway.handle(message("I need a person", "e1"))
    await app.gateway.handle(message("I need a person", "e1"))  # redelivered: once
    assert _finals(channel) == [WAITING]
    await _set_mode(app, "human")
    await app.gateway.handle(message("are you there?", "e2"))  # the person answers, not us
    await app.gateway.handle(message("/help", "e3"))  # commands go before the mode
    help_ = APP_HELP if app.schedules.desk is not None else CHAT_HELP  # `bot chat`: no /schedule
    assert _finals(channel) == [WAITING, help_]
    await app.gateway.wait_idle()
    assert provider.requests == []
    await _set_mode(app, "bot")
    await app.gateway.handle(message("thanks", "e4"))
    await app.gateway.wait_idle()
    assert _finals(channel) == [WAITING, help_, "welcome back"]
    said = [m.content for m in provider.requests[0].messages if m.role == "user"]
    assert said[-3:] == ["I need a person", "are you there?", "thanks"]


async def test_an_allowlist_refusal_and_a_stop_are_routed_as_before(start: Start) -> None:
    app, channel = await start(ScriptedProvider([]))
    await app.gateway.handle(message("/stop", "e1"))
    await app.gateway.handle(message("/new", "e2"))
    assert _finals(channel) == [
        "Nothing to stop.",
        "Started a new conversation. What can I do for you?",
    ]
    assert REFUSAL not in _finals(channel)


async def test_in_redis_the_queue_reads_the_mode_as_it_claims(
    prefix: str, running: Running
) -> None:
    """The mode check is in ENQUEUE: a mode set by another process (here: straight in Redis)
    holds the very next message, with no read of its own."""
    channel = RecordingChannel()
    provider = ScriptedProvider([])
    app = await running(provider, channels=[channel], redis={"url": URL, "prefix": prefix})
    assert app.redis is not None
    await app.redis.redis.hset(
        state_key(prefix, CHAT.key), mapping={"mode": "waiting", "version": 1}
    )
    await app.gateway.handle(message("hello", "e1"))
    assert _finals(channel) == [WAITING]
    assert await app.redis.dedup.claim("e1") is False  # claimed by the script that held it


async def test_a_mode_set_by_one_process_holds_the_next_message_in_another(
    tmp_path: Path,
) -> None:
    """Embedded, two processes on one SQLite file: the state is the store's, read per message."""
    channels = [RecordingChannel(), RecordingChannel()]
    provider = ScriptedProvider([])
    apps = [
        App(
            make_config(tmp_path),
            base_dir=tmp_path,
            provider=provider,
            channels=[c],
            web_server=False,
        )
        for c in channels
    ]
    async with apps[0], apps[1]:
        await _set_mode(apps[0], "waiting")
        await apps[1].gateway.handle(message("anyone?", "e1"))
        assert _finals(channels[1]) == [WAITING] and provider.requests == []
