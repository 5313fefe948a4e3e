"""`tools.pii.mask_user_text`: the user's own e-mail and card number reach the model masked."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from adapters.base import ChatRef, InboundMessage
from agent.providers.scripted import Reply, ScriptedProvider
from bot.runtime.app import App
from tests.conftest import make_config
from tests.fakes import RecordingChannel

SAID = "Write to ann.lee@example.com and charge 4111 1111 1111 1111, please."


async def _model_sees(tmp_path: Path, mask_user_text: bool) -> tuple[str, str]:
    """What the model received and what the history stored, for one message saying `SAID`."""
    provider = ScriptedProvider([Reply("noted")])
    channel = RecordingChannel()
    config = make_config(tmp_path, tools={"pii": {"mask_user_text": mask_user_text}})
    app = App(config, base_dir=tmp_path, provider=provider, channels=[channel], web_server=False)
    async with app:
        message = InboundMessage(ChatRef("fake", "dm-u1"), "u1", SAID, "e1", "m1", mentioned=True)
        await app.gateway.handle(message)
        await app.gateway.wait_idle()
    content = provider.requests[0].messages[-1].content
    assert isinstance(content, str)
    with sqlite3.connect(tmp_path / "bot.db") as db:
        (stored,) = db.execute("SELECT content FROM messages WHERE role = 'user'").fetchone()
    return content, stored


@pytest.mark.parametrize("mask_user_text", [True, False])
async def test_the_users_personal_data_is_masked_only_when_asked(
    tmp_path: Path, mask_user_text: bool
) -> None:
    seen, stored = await _model_sees(tmp_path, mask_user_text)
    if mask_user_text:
        assert seen == "Write to [email] and charge [card number], please."
        assert stored == seen
    else:
        assert seen == SAID and stored == SAID
