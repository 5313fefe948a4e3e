"""`server.event_loop`: `bot serve` runs on uvloop unless told otherwise, and a web socket turn
goes through the capped listener on either loop (uvloop's transport is no `asyncio.Transport`)."""

from __future__ import annotations

import re
from pathlib import Path

import aiohttp
import pytest

from bot.runtime.config import ConfigError, load_config
from tests.processes import frames_until, one_gateway, open_tab, write_config

pytestmark = pytest.mark.process


@pytest.mark.parametrize(("choice", "loop"), [("auto", "uvloop"), ("asyncio", "asyncio")])
async def test_serve_answers_a_web_socket_turn_on_the_loop_chosen(
    tmp_path: Path, choice: str, loop: str
) -> None:
    config = write_config(tmp_path, server={"event_loop": choice})
    async with one_gateway(config, env={}) as gateway, aiohttp.ClientSession() as session:
        tab = await open_tab(session, gateway, "visitor-loop")
        await tab.send_json({"type": "message", "text": "hello", "client_message_id": "m1"})
        frames = await frames_until(tab, lambda f: f["type"] == "message.completed")
        await tab.close()
    assert frames[-1]["text"]
    assert gateway.logged(f"event loop: {loop} (server.event_loop: {choice})") == 1


def test_an_unknown_event_loop_is_named_with_its_key(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("server:\n  event_loop: trio\n")
    expected = "server.event_loop: expected one of 'auto', 'asyncio', 'uvloop', got 'trio'"
    with pytest.raises(ConfigError, match=re.escape(expected)):
        load_config(path)
