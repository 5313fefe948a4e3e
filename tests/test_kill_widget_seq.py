"""Embedded mode (one process, no Redis), a web socket open through a kill -9: the restarted
process numbers the conversation's frames from 1 again, so the client's last `seq` is stale. Its
hello says which `epoch` that seq was counted in; the server, seeing another, sends what it kept
(here: the apology of the turn it could not resume) as history frames, without `seq`, which the
client cannot mistake for frames it already has.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import aiohttp
import pytest

from bot.pipeline.resume import GAVE_UP
from tests.conftest import ORIGIN
from tests.fake_llm import llm_config
from tests.gated_model import GatedOpenAI
from tests.kill_kit import rows, until
from tests.processes import Frame, frames_until, joined_logs, one_gateway, write_config

pytestmark = [pytest.mark.process, pytest.mark.timeout(600)]  # two `bot serve` starts
WAIT_S = 120.0


async def test_a_client_resuming_with_a_seq_from_before_a_kill_gets_the_apology(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    visitor = f"visitor-{uuid.uuid4().hex[:8]}"
    async with GatedOpenAI() as model:  # never opened: the turn runs until the kill
        llm = llm_config("openai", model, first_token_timeout_s=250, total_timeout_s=280)
        config = write_config(
            tmp_path,
            llm=llm | {"max_retries": 0},
            agent={"resume_max_attempts": 0},  # the restart gives the turn up: an apology
            log={"level": "DEBUG"},
        )
        async with one_gateway(config, {}) as first:
            tab = await session.ws_connect(f"{first.url}/ws", headers={"Origin": ORIGIN})
            await tab.send_json({"type": "hello", "visitor_id": visitor})
            ready = (await frames_until(tab, lambda f: f["type"] == "ready"))[-1]
            await tab.send_json({"type": "message", "text": "hello", "client_message_id": "c1"})
            await model.wait_held(1)
            seen = await frames_until(tab, lambda f: f["type"] == "message.created", WAIT_S)
            placeholder = seen[-1]
            last_seq = max(f["seq"] for f in seen if "seq" in f)
            first.process.kill()
            await first.process.wait()
        async with one_gateway(config, {}) as second:
            try:  # the restart gave the turn up (its apology was published) before this
                await until(lambda: rows(tmp_path, "select status from turns") == [("failed",)])
                again = await session.ws_connect(f"{second.url}/ws", headers={"Origin": ORIGIN})
                hello = {"type": "hello", "visitor_id": visitor, "resume_after": last_seq}
                if "epoch" in ready:  # what a client keeps with its last seq
                    hello["epoch"] = ready["epoch"]
                await again.send_json(hello)
                frames = await frames_until(
                    again,
                    lambda f: (
                        f["type"] == "message.completed"
                        and f["message_id"] == placeholder["message_id"]
                    ),
                    WAIT_S,
                )
            except (AssertionError, TimeoutError):
                raise AssertionError(f"the logs:\n{joined_logs([first, second])}") from None
    now: Frame = frames[0]
    assert now["type"] == "ready" and now["epoch"] != ready["epoch"]
    apology = frames[-1]
    assert apology["text"] == GAVE_UP
    # numbered anew after the restart: without the epoch, rule 2 would drop it as seen
    kept = [f for f in frames[1:] if "seq" in f]
    assert all(f["seq"] > now["seq"] for f in kept), frames
    assert "seq" not in apology and apology["history"] is True
