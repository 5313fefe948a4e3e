"""Several accounts of one channel kind: two Telegram bots side by side, each with its own
persona and conversations; one bot's token given twice is refused, naming both holders."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent.providers.scripted import Reply, ScriptedProvider
from bot.runtime.app import App
from bot.runtime.config import ConfigError, load_config
from tests.conftest import ROOT, make_config
from tests.telegram_fake import BOT_ID, TOKEN, FakeBotAPI

SUPPORT_TOKEN = "654321:SUPPORT"
SUPPORT_BOT = {"id": 654321, "is_bot": True, "first_name": "Help", "username": "help_bot"}
SUPPORT_PERSONA = """---
name: support
description: Answers customers of the support bot.
tools: []
---
You are the SUPPORT desk.
"""


@pytest.fixture
async def fakes() -> AsyncIterator[tuple[FakeBotAPI, FakeBotAPI]]:
    main, support = (
        FakeBotAPI(interval_s=0.05),
        FakeBotAPI(interval_s=0.05, token=SUPPORT_TOKEN, bot=SUPPORT_BOT),
    )
    await main.start()
    await support.start()
    yield main, support
    await main.close()
    await support.close()


class Seen(logging.Handler):
    """Sets `event` when a log line containing `text` is emitted (the refusal is a log line)."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.ERROR)
        self.text = text
        self.lines: list[str] = []
        self.event = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.lines.append(record.getMessage())
            self.event.set()


def personas(tmp_path: Path) -> str:
    folder = tmp_path / "personas"
    shutil.copytree(ROOT / "personas", folder)
    (folder / "support.md").write_text(SUPPORT_PERSONA)
    return str(folder)


def bot(fake: FakeBotAPI, **extra: Any) -> dict[str, Any]:
    return {"enabled": True, "token": fake.token, "api_base": fake.url} | extra


async def polling(fake: FakeBotAPI) -> None:
    await fake.wait_for(lambda: any(c.method == "getupdates" for c in fake.calls))


async def test_two_bots_answer_their_own_chats_with_their_own_personas(
    tmp_path: Path, fakes: tuple[FakeBotAPI, FakeBotAPI]
) -> None:
    main, support = fakes
    config = make_config(
        tmp_path,
        personas={"dirs": [personas(tmp_path)]},
        channels={
            "telegram": [
                bot(main, id="telegram"),
                bot(support, id="support", persona="support", allowed_users=["42"]),
            ]
        },
    )
    provider = ScriptedProvider([Reply("from main"), Reply("from support")])
    async with App(config, base_dir=tmp_path, provider=provider) as app:
        assert sorted(app.channels) == ["support", "telegram", "websocket"]
        await polling(main)
        await polling(support)
        # the same chat id and the same update id on both bots: two conversations, two turns
        main.push(main.message(42, "hi main"))
        await provider.wait_requests(1)
        await app.gateway.wait_idle()
        support.push(support.message(42, "hi support"))
        await provider.wait_requests(2)
        await app.gateway.wait_idle()
        await main.wait_for(lambda: "from main" in main.messages.values())
        await support.wait_for(lambda: "from support" in support.messages.values())
        assert "from support" not in main.messages.values()
        first, second = provider.requests
        assert "SUPPORT desk" not in first.system and "SUPPORT desk" in second.system
        sessions = (
            await app.store.admin_sessions(limit=10)
            if hasattr(app.store, "admin_sessions")
            else None
        )
        del sessions
        assert await app.store.conversation_chat("telegram:42") is not None
        chat = await app.store.conversation_chat("support:42")
        assert chat is not None and chat.channel == "support"
        # the support bot's own access list: another user there is refused, not answered
        support.push(support.message(7, "let me in"))
        await support.wait_for(lambda: len(support.ok(7, "sendMessage")) == 1)
        assert len(provider.requests) == 2


async def test_one_token_for_two_gateways_is_refused_naming_both(
    tmp_path: Path, fakes: tuple[FakeBotAPI, FakeBotAPI]
) -> None:
    """Two gateways on one data folder and one bot token: the second's Telegram channel stays
    off, saying which instance of which process holds the bot; the first goes on answering."""
    main, _ = fakes
    first = make_config(tmp_path, channels={"telegram": bot(main)})
    other = tmp_path / "other"
    other.mkdir()
    data = json.loads((tmp_path / "config.yaml").read_text())
    data["channels"] = {"telegram": [bot(main, id="copy")]}
    (other / "config.yaml").write_text(json.dumps(data))
    second = load_config(other / "config.yaml", env={})
    provider = ScriptedProvider([Reply("answered once")])
    refusal = Seen(f"Telegram bot @test_bot (id {BOT_ID}) is already run by instance 'telegram'")
    logging.getLogger("bot.runtime.app").addHandler(refusal)
    try:
        async with App(first, base_dir=tmp_path, provider=provider) as one:
            await polling(main)
            async with App(second, base_dir=other, provider=provider):
                await asyncio.wait_for(refusal.event.wait(), 30)
                assert "this one (instance 'copy'" in refusal.lines[0]
                main.push(main.message(42, "hi"))
                await provider.wait_requests(1)
                await one.gateway.wait_idle()
            await main.wait_for(lambda: "answered once" in main.messages.values())
    finally:
        logging.getLogger("bot.runtime.app").removeHandler(refusal)


@pytest.mark.parametrize(
    ("channels", "error"),
    [
        (
            {"telegram": [{"enabled": False, "token": TOKEN}]},
            "channels.telegram: item 0 has no id; each of several telegram instances needs one",
        ),
        (
            {"telegram": [{"id": "a"}], "slack": [{"id": "a"}]},
            "channels.slack (id 'a'): id 'a' is also used by channels.telegram (id 'a')",
        ),
        (
            {"telegram": [{"id": "slack"}]},
            "channels.telegram (id 'slack'): id 'slack' is another channel's name",
        ),
        (
            {
                "telegram": [
                    {"id": "a", "enabled": True, "token": TOKEN},
                    {"id": "b", "enabled": True, "token": TOKEN},
                ]
            },
            "channels.telegram (id 'b'): the same account (bot token / app id) as "
            "channels.telegram (id 'a')",
        ),
        (
            {"telegram": [{"id": "Bad Id"}]},
            "channels.telegram.0.id: expected 1-32 characters of a-z, 0-9",
        ),
    ],
)
def test_instance_mistakes_are_one_line_errors(
    tmp_path: Path, channels: dict[str, Any], error: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        make_config(tmp_path, channels=channels)
    assert error in str(caught.value)
    assert TOKEN not in str(caught.value)  # a secret is never repeated


def test_a_single_mapping_is_the_instance_named_after_its_kind(tmp_path: Path) -> None:
    config = make_config(tmp_path, channels={"telegram": {"enabled": False}})
    [telegram] = config.channels.telegram
    assert telegram.id == "telegram"
    with pytest.raises(ConfigError, match=r"channels\.telegram\.token: malformed"):
        make_config(tmp_path, channels={"telegram": {"enabled": True, "token": "nope"}})
