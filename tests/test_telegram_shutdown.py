"""Stopping the gateway mid-answer in Telegram: the placeholder says so, and nothing is left open."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

from aiogram.client.session.aiohttp import AiohttpSession

from adapters.telegram import TelegramChannel
from adapters.telegram.render import to_html, visible_text
from agent.providers.scripted import Reply, ScriptedProvider
from bot.pipeline.turn import INTERRUPTED
from tests import test_telegram as tg
from tests.telegram_fake import FakeBotAPI

fake = tg.fake
telegram = tg.telegram


async def test_a_stop_mid_answer_ends_the_placeholder_and_closes_the_session(
    telegram: tg.Start, fake: FakeBotAPI
) -> None:
    provider = ScriptedProvider([Reply("A slow answer.", delay_s=30)])
    app = await telegram(provider)
    channel = app.channels["telegram"]
    assert isinstance(channel, TelegramChannel)
    fake.push(fake.message(42, "hi"))
    await fake.wait_for(lambda: len(fake.ok(42, "sendMessage")) == 1)
    await provider.wait_requests(1)
    await app.stop()
    assert tg.shown(fake, 42) == [visible_text(to_html(INTERRUPTED))]  # not left "Thinking…"
    assert isinstance(channel.bot.session, AiohttpSession)
    session = channel.bot.session._session
    assert session is None or session.closed
    # And no session reopened by a last edit is left for the garbage collector to complain of.
    complaints: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, context: complaints.append(context))
    try:
        del session
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    assert not [c for c in complaints if "Unclosed" in str(c.get("message"))]
