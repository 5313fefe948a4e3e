"""`/model` through one real `bot serve` process is seen by another: the choice lives in the
conversation's state in Redis, read at the start of every turn, never cached by a process.

Process B answers the conversation first with the default model; process A takes `/model mini`
and then stops, so B alone runs the next turn, whose request must reach mini's own fake server.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.fake_llm import Reply, llm_config
from tests.fake_openai import FakeOpenAI
from tests.processes import frames_until, joined_logs, one_gateway, open_tab, write_config
from tests.redis_kit import URL, prefix

__all__ = ["prefix"]
pytestmark = [pytest.mark.process, pytest.mark.timeout(300)]


def _completed(text: str) -> Callable[[dict[str, Any]], bool]:
    return lambda f: f["type"] == "message.completed" and f["text"].startswith(text)


async def test_a_model_switch_on_one_process_is_seen_by_another(
    prefix: str, tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    visitor = f"visitor-{uuid.uuid4().hex[:8]}"
    async with FakeOpenAI() as default, FakeOpenAI(api_key="mini-key") as mini:
        default.add(Reply(["default answer"]))
        mini.add(Reply(["mini answer"]))
        mini_choice = {"name": "mini", "provider": "openai", "model": "mini-model",
                       "base_url": mini.url, "api_key": mini.api_key, "display": "GPT mini"}  # fmt: skip
        config = write_config(
            tmp_path,
            redis={"url": URL, "prefix": prefix, "lease_s": 4},
            llm=llm_config("openai", default, choices=[mini_choice], max_retries=0),
            log={"level": "DEBUG"},
        )
        async with one_gateway(config, {}) as b:
            tab_b = await open_tab(session, b, visitor)
            await tab_b.send_json({"type": "message", "text": "hello", "client_message_id": "c1"})
            first = await frames_until(tab_b, _completed("default answer"))
            assert first[-1]["text"] == "default answer"

            async with one_gateway(config, {}) as a:
                tab_a = await open_tab(session, a, visitor)
                command = {"type": "message", "text": "/model mini", "client_message_id": "c2"}
                await tab_a.send_json(command)
                switched = await frames_until(tab_a, _completed("This conversation now uses"))
                assert switched[-1]["text"] == "This conversation now uses GPT mini."
                await tab_a.close()
                logs = joined_logs([b, a])
            # A is gone: B runs the next turn, with what A wrote
            await tab_b.send_json({"type": "message", "text": "again", "client_message_id": "c3"})
            done = await frames_until(tab_b, _completed("mini answer"))
            assert done[-1]["text"] == "mini answer\n\n— answered by GPT mini", logs
            assert [len(default.requests), len(mini.requests)] == [1, 1], joined_logs([b])
            assert mini.requests[0].body["model"] == "mini-model"
