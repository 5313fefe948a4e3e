"""The gateway with a recording fake channel: access policy, dedup, timeouts, commands."""

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

from adapters.base import ChatRef, InboundMessage
from agent.providers.scripted import Reply, ScriptedProvider
from bot.pipeline.commands import CHAT_HELP as HELP  # no web server: no /schedule
from bot.pipeline.gateway import REFUSAL
from bot.pipeline.turn import TIMED_OUT
from bot.runtime.app import App
from tests.conftest import make_config
from tests.fakes import RecordingChannel


async def _app(
    tmp_path: Path, provider: ScriptedProvider, **sections: Any
) -> tuple[App, RecordingChannel]:
    channel = RecordingChannel()
    app = App(
        make_config(tmp_path, **sections),
        base_dir=tmp_path,
        provider=provider,
        channels=[channel],
        web_server=False,
    )
    await app.__aenter__()
    return app, channel


def _msg(
    text: str, event: str, *, user: str = "u1", group: bool = False, mentioned: bool = True
) -> InboundMessage:
    chat = ChatRef("fake", "group-1" if group else f"dm-{user}")
    return InboundMessage(
        chat, user, text, event, f"msg-{event}", is_group=group, mentioned=mentioned
    )


async def _shown(app: App, channel: RecordingChannel) -> list[str]:
    """Once every turn is over, what each message shows last (not which call carried `final`:
    a final equal to the preview before it is skipped, and whether a preview came is timing)."""
    await app.gateway.wait_idle()
    return channel.shown()


async def test_allowlist_refuses_politely_and_never_calls_the_model(tmp_path: Path) -> None:
    provider = ScriptedProvider([Reply("hi friend")])
    app, channel = await _app(tmp_path, provider, gateway={"allowed_users": ["u1"]})
    try:
        await app.gateway.handle(_msg("hello", "e1", user="stranger"))
        await app.gateway.handle(_msg("hello", "e2", user="u1"))
        assert await _shown(app, channel) == [REFUSAL, "hi friend"]
        assert len(provider.requests) == 1
    finally:
        await app.stop()


async def test_group_messages_need_a_mention(tmp_path: Path) -> None:
    provider = ScriptedProvider([Reply("you called?")])
    app, channel = await _app(tmp_path, provider)
    try:
        await app.gateway.handle(_msg("chatter", "e1", group=True, mentioned=False))
        await app.gateway.handle(_msg("@bot help me", "e2", group=True, mentioned=True))
        assert await _shown(app, channel) == ["you called?"]
        assert provider.requests[0].messages[-1].content == "@bot help me"
    finally:
        await app.stop()


async def test_a_redelivered_event_is_answered_once(tmp_path: Path) -> None:
    provider = ScriptedProvider([Reply("once")])
    app, channel = await _app(tmp_path, provider)
    try:
        await app.gateway.handle(_msg("hello", "same-event"))
        await app.gateway.handle(_msg("hello", "same-event"))
        await app.gateway.wait_idle()
        await app.gateway.handle(_msg("hello", "same-event"))
        assert await _shown(app, channel) == ["once"]
        assert len([c for c in channel.calls if c.kind == "send"]) == 1
    finally:
        await app.stop()


async def test_turn_timeout_edits_a_clear_message_into_the_placeholder(tmp_path: Path) -> None:
    provider = ScriptedProvider([Reply("too late", wait=asyncio.Event())])
    app, channel = await _app(tmp_path, provider, agent={"turn_timeout_s": 0.1})
    try:
        await app.gateway.handle(_msg("slow please", "e1"))
        assert await _shown(app, channel) == [TIMED_OUT]
        assert channel.calls[-1].message_id == channel.calls[0].message_id
    finally:
        await app.stop()


async def test_help_and_unknown_commands(tmp_path: Path) -> None:
    provider = ScriptedProvider([Reply("a model answer")])
    app, channel = await _app(tmp_path, provider)
    try:
        await app.gateway.handle(_msg("/help@somebot", "e1"))
        await app.gateway.handle(_msg("/frobnicate now", "e2"))
        assert await _shown(app, channel) == [HELP, "a model answer"]
        assert provider.requests[0].messages[-1].content == "/frobnicate now"
    finally:
        await app.stop()


async def test_a_provider_failure_shows_its_safe_message(tmp_path: Path) -> None:
    from agent.providers.base import ProviderRejected

    provider = ScriptedProvider([Reply(error=ProviderRejected("401 invalid x-api-key sk-secret"))])
    app, channel = await _app(tmp_path, provider)
    try:
        await app.gateway.handle(_msg("hi", "e1"))
        finals = await _shown(app, channel)
        assert finals == [f"Sorry — {ProviderRejected.user_message}"]
        assert "sk-secret" not in finals[0]
    finally:
        await app.stop()


async def test_a_shutdown_mid_turn_tells_the_user_and_the_next_start_closes_the_record(
    tmp_path: Path,
) -> None:
    from bot.pipeline.turn import INTERRUPTED

    provider = ScriptedProvider([Reply("never", wait=asyncio.Event())])
    app, channel = await _app(tmp_path, provider)
    await app.gateway.handle(_msg("long question", "e1"))
    await provider.wait_requests(1)
    await app.stop()
    assert [c.text for c in channel.calls if c.final] == [INTERRUPTED]
    assert channel.calls[-1].message_id == channel.calls[0].message_id  # the placeholder itself
    with sqlite3.connect(tmp_path / "bot.db") as db:
        rows = db.execute("select status, error from turns").fetchall()
    assert rows == [("failed", "interrupted by shutdown")]


async def test_turns_left_running_by_a_killed_process_are_closed_at_start(tmp_path: Path) -> None:
    from bot.storage import SqliteStore

    async with SqliteStore(tmp_path / "bot.db") as store:  # as a process killed mid-turn left it
        for turn_id, channel in (("t1", "fake"), ("t2", "telegram")):
            session_id = await store.active_session(
                channel=channel, conversation_key="k", user_id="u"
            )
            await store.create_turn(
                turn_id=turn_id,
                session_id=session_id,
                channel=channel,
                conversation_key="k",
                inbound_event_ids=[f"e-{turn_id}"],
                placeholder=None,
            )
    app, _ = await _app(tmp_path, ScriptedProvider([]))  # like `bot chat`: no platform channels
    await app.stop()
    with sqlite3.connect(tmp_path / "bot.db") as db:
        rows = db.execute("select id, status, error from turns order by id").fetchall()
    # a Telegram turn is left to the next `bot serve`, which can still edit its placeholder
    assert rows == [
        ("t1", "failed", "not resumed: no placeholder was recorded"),
        ("t2", "running", None),
    ]


async def test_stop_while_the_answer_is_being_delivered_still_ends_the_placeholder(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider([Reply("the full answer")])
    app, channel = await _app(tmp_path, provider)
    try:
        channel.edit_gate = asyncio.Event()  # the final edit is in flight, not landed
        await app.gateway.handle(_msg("question", "e1"))
        await provider.wait_requests(1)
        await app.gateway.handle(_msg("/stop", "e2"))
        channel.edit_gate.set()
        finals = await _shown(app, channel)
        assert finals == ["the full answer"]  # the answer was ready: it lands, nothing else
    finally:
        await app.stop()
