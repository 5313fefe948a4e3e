"""The gateway with Telegram (fake) for users and Slack (fake) for operators, for handoff tests."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent.providers.scripted import ScriptedProvider
from bot.runtime.app import App
from tests.conftest import ROOT, eventually, make_config
from tests.slack_events import button_press, envelope, message
from tests.slack_fake import APP_TOKEN, BOT_TOKEN, FakeSlack
from tests.telegram_fake import FakeBotAPI

OPS = "COPS1"  # the operators' Slack channel
USER_CHAT = 4242  # the Telegram user's private chat
ADMIN_TOKEN = "admin-handoff-token-5e1c"


def personas(tmp_path: Path) -> str:
    """The shipped personas, the coordinator allowed `transfer_to_human`."""
    folder = tmp_path / "personas"
    if not folder.exists():
        shutil.copytree(ROOT / "personas", folder)
        default = folder / "default.md"
        text = default.read_text()
        default.write_text(text.replace("tools: [", "tools: [transfer_to_human, ", 1))
    return str(folder)


@dataclass
class Desk:
    """The fakes, and a way to start (and restart) the gateway on them."""

    tmp_path: Path
    telegram: FakeBotAPI
    slack: FakeSlack
    apps: list[App]

    def config(self, **handoff: Any) -> Any:
        return make_config(
            self.tmp_path,
            personas={"dirs": [personas(self.tmp_path)]},
            channels={
                "telegram": {"enabled": True, "token": self.telegram.token, "api_base": self.telegram.url},
                "slack": {
                    "enabled": True, "bot_token": BOT_TOKEN, "app_token": APP_TOKEN,
                    "api_base": self.slack.url, "edit_interval_s": 0.1,
                },
                "websocket": {"enabled": True},
            },
            handoff={"place": f"slack:slack/{OPS}"} | handoff,
            admin={"token": ADMIN_TOKEN},
        )  # fmt: skip

    async def start(self, provider: ScriptedProvider, **handoff: Any) -> App:
        app = App(self.config(**handoff), base_dir=self.tmp_path, provider=provider)
        await app.__aenter__()
        self.apps.append(app)
        await self.slack.wait_for(lambda: self.slack.connected > 0)
        return app

    # -- what the user sees ------------------------------------------------------------
    def user_texts(self) -> list[str]:
        """Every text the bot showed the Telegram user, final versions, in order."""
        shown: dict[int, str] = {}
        for call in self.telegram.ok(USER_CHAT, "sendmessage", "editmessagetext"):
            key = int(call.params.get("message_id") or len(shown) + 10_000_000)
            if call.method == "sendmessage":
                key = -len(shown) - 1
            shown[key] = str(call.params.get("text", ""))
        return list(shown.values())

    def sent_to_user(self) -> list[str]:
        return [str(c.params.get("text", "")) for c in self.telegram.ok(USER_CHAT, "sendmessage")]

    async def user_says(self, text: str) -> None:
        self.telegram.push(self.telegram.message(USER_CHAT, text))

    async def user_sees(self, part: str, timeout: float = 30.0) -> None:
        await eventually(lambda: any(part in t for t in self.user_texts()), timeout)

    # -- the operators' channel --------------------------------------------------------
    def parents(self) -> list[Any]:
        return [m for m in self.slack.bot_messages(OPS) if m.thread_ts is None]

    def thread(self, parent_ts: str) -> list[str]:
        return self.slack.thread(OPS, parent_ts)

    async def press(
        self, action: str, handoff_id: str, parent_ts: str, user: str = "UOP1", name: str = "ana"
    ) -> None:
        payload = button_press(
            action,
            value=handoff_id,
            label=action,
            channel=OPS,
            message_ts=parent_ts,
            thread_ts=None,
        )
        payload["user"] = {"id": user, "username": name, "team_id": "T1"}
        await self.slack.push("interactive", payload)

    async def operator_says(
        self, text: str, parent_ts: str, *, user: str = "UOP1", times: int = 1
    ) -> None:
        """A reply in the handoff's thread; `times` > 1: Slack delivers the same event again."""
        event = message(text, channel=OPS, user=user, thread_ts=parent_ts)
        body = envelope(event)
        for attempt in range(times):
            await self.slack.push("events_api", body, retry=attempt)


@pytest.fixture
async def desk(tmp_path: Path) -> AsyncIterator[Desk]:
    telegram, slack = FakeBotAPI(interval_s=0.05), FakeSlack()
    await telegram.start()
    await slack.start()
    made = Desk(tmp_path, telegram, slack, [])
    yield made
    for app in made.apps:
        await app.stop()
    await telegram.close()
    await slack.close()


Predicate = Callable[[], bool]


async def until(predicate: Predicate, timeout: float = 30.0) -> None:
    """`eventually`, with the patience of a machine shared with a stress run."""
    await eventually(predicate, timeout)
