"""The gateway over its seams, as several processes would use them: two Apps on one database."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from adapters.base import Action, ChatRef, InboundMessage
from agent.providers.scripted import Reply, ScriptedProvider
from agent.workers import BackgroundResult
from bot.runtime.app import App
from tests.conftest import Running, make_config
from tests.fakes import RecordingChannel

CHAT = ChatRef("fake", "dm-1")
Start = Callable[[ScriptedProvider], "AsyncIterator[tuple[App, RecordingChannel]]"]


@pytest.fixture
async def apps(tmp_path: Path) -> AsyncIterator[Callable[..., object]]:
    """`app, channel = await start(provider)`: one more gateway "process" on the same file."""
    async with AsyncExitStack() as stack:

        async def start(provider: ScriptedProvider) -> tuple[App, RecordingChannel]:
            channel = RecordingChannel()
            app = App(
                make_config(tmp_path),
                base_dir=tmp_path,
                provider=provider,
                channels=[channel],
                web_server=False,
            )
            await stack.enter_async_context(app)
            return app, channel

        yield start


def message(text: str, event: str, action: Action | None = None) -> InboundMessage:
    return InboundMessage(CHAT, "u1", text, event, f"m-{event}", action=action)


async def test_new_in_one_process_starts_a_fresh_session_in_the_other(
    apps: Callable[..., object],
) -> None:
    a_provider = ScriptedProvider([Reply("one"), Reply("three")])
    b_provider = ScriptedProvider([Reply("two")])
    a, _ = await apps(a_provider)  # type: ignore[misc]
    b, _ = await apps(b_provider)  # type: ignore[misc]
    await a.gateway.handle(message("remember 42", "e1"))
    await a.gateway.wait_idle()
    await b.gateway.handle(message("/new", "e2"))
    await b.gateway.handle(message("what number?", "e3"))
    await b.gateway.wait_idle()
    await a.gateway.handle(message("and now?", "e4"))
    await a.gateway.wait_idle()
    # after /new in B, neither process shows the model the old conversation
    assert [m.content for m in b_provider.requests[0].messages if m.role == "user"][-1:] == [
        "what number?"
    ]
    later = [m.content for m in a_provider.requests[1].messages if m.role == "user"]
    assert "remember 42" not in later and later[-1] == "and now?"


async def test_an_event_claimed_by_one_process_is_not_answered_by_another(
    apps: Callable[..., object],
) -> None:
    a_provider, b_provider = ScriptedProvider([Reply("once")]), ScriptedProvider([])
    a, _ = await apps(a_provider)  # type: ignore[misc]
    b, b_channel = await apps(b_provider)  # type: ignore[misc]
    await a.gateway.handle(message("hello", "same"))
    await b.gateway.handle(message("hello", "same"))  # the platform's retry reached B
    await a.gateway.wait_idle()
    await b.gateway.wait_idle()
    assert len(a_provider.requests) == 1 and not b_provider.requests and not b_channel.calls


async def test_a_background_result_reaches_a_process_that_never_saw_the_chat(
    apps: Callable[..., object],
) -> None:
    a, _ = await apps(ScriptedProvider([Reply("working on it")]))  # type: ignore[misc]
    await a.gateway.handle(message("research this", "e1"))
    await a.gateway.wait_idle()
    b_provider = ScriptedProvider([Reply("here is what it found")])
    b, b_channel = await apps(b_provider)  # type: ignore[misc]
    result = BackgroundResult(
        "t1", "specialist-research", "look", "completed", "42", "fake:dm-1", "fake", "u1"
    )
    await b.background.deliver(result)
    await b.background.deliver(result)  # delivered once, however often it is handed in
    await b.gateway.wait_idle()
    assert b_channel.shown() == ["here is what it found"]
    assert "task-notification" in str(b_provider.requests[0].messages[-1].content)


async def test_a_button_press_is_never_a_command(apps: Callable[..., object]) -> None:
    provider = ScriptedProvider([Reply("noted")])
    app, channel = await apps(provider)  # type: ignore[misc]
    press = Action("cmd", "/new", "Start over", "m-1")
    await app.gateway.handle(message("", "e1", action=press))
    await app.gateway.wait_idle()
    assert provider.requests[0].messages[-1].content == (
        "[The user pressed the button “Start over” (value: '/new').]"
    )
    assert channel.shown() == ["noted"]


async def test_a_message_past_a_full_queue_is_refused_with_a_reply(
    apps: Callable[..., object],
) -> None:
    from bot.pipeline.gateway import QUEUE_FULL

    gate = asyncio.Event()
    provider = ScriptedProvider([Reply("one", wait=gate), Reply("two")])
    app, channel = await apps(provider)  # type: ignore[misc]
    app.conversations.max_queued = 2
    await app.gateway.handle(message("m0", "e0"))
    await provider.wait_requests(1)  # its turn runs, held open by the gate
    for n in (1, 2, 3):  # two wait, the third finds the queue full
        await app.gateway.handle(message(f"m{n}", f"e{n}"))
    assert [c.text for c in channel.calls if c.final] == [QUEUE_FULL]
    gate.set()
    await app.gateway.wait_idle()
    assert channel.shown() == ["one", QUEUE_FULL, "two"]


async def test_a_silent_tcp_connection_is_closed(running: Running) -> None:
    app = await running(ScriptedProvider([]), server={"idle_timeout_s": 0.5})
    reader, writer = await asyncio.open_connection("127.0.0.1", app.port)
    async with asyncio.timeout(10):
        assert await reader.read() == b""  # the server hung up on a client that said nothing
    writer.close()
