"""kill -9 of the process running a web turn at the instant its placeholder reached the user,
before the model call began: the surviving process finishes the turn in THAT placeholder.

Two real `bot serve` processes on one SQLite file and one Redis; a tab of the visitor on each.
Process A takes the message and runs the turn. Its Redis traffic goes through a proxy that
passes the command publishing the placeholder's `message.created` (so B's tab shows it) and
then freezes A: A never hears the reply, so it does nothing more (no record written after the
frame, no model call). A is killed there; B takes the conversation over when A's lease runs
out. The web socket's message ids are the gateway's own, so A recorded the placeholder's id
before the frame went out, and B edits that message: the user sees one bubble, answered once.
(bench/takeover.py measures the same takeover and checks "same placeholder".)
"""

from __future__ import annotations

import uuid
from pathlib import Path

import aiohttp
import pytest

from tests.fake_llm import llm_config
from tests.gated_model import GatedOpenAI
from tests.processes import Frame, frames_until, joined_logs, one_gateway, open_tab, write_config
from tests.redis_kit import URL, prefix
from tests.redis_proxy import HoldingProxy

__all__ = ["prefix"]
pytestmark = [pytest.mark.process, pytest.mark.timeout(600)]  # two `bot serve` starts
WAIT_S = 120.0  # a takeover on a loaded machine: the lease (2 s) and a resumed turn


def _created(frame: Frame) -> bool:
    return bool(frame["type"] == "message.created")


async def test_a_web_turn_killed_right_after_its_placeholder_went_out_ends_in_that_placeholder(
    prefix: str, tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    visitor = f"visitor-{uuid.uuid4().hex[:8]}"
    proxy = HoldingProxy(URL)
    proxy.freeze_after(b'"type":"message.created"')
    async with GatedOpenAI() as model:
        await model.allow(10)  # no gate: only B's resumed turn ever reaches the model
        llm = llm_config("openai", model, first_token_timeout_s=250, total_timeout_s=280)
        config = write_config(
            tmp_path,
            redis={"url": "${REDIS_URL}", "prefix": prefix, "lease_s": 2},
            llm=llm | {"max_retries": 0},
            log={"level": "DEBUG"},
        )
        a_url = await proxy.start()
        async with (
            one_gateway(config, {"REDIS_URL": a_url}) as a,
            one_gateway(config, {"REDIS_URL": URL}) as b,
        ):
            try:
                tab_b = await open_tab(session, b, visitor)
                tab_a = await open_tab(session, a, visitor)
                await tab_a.send_json(
                    {"type": "message", "text": "hello", "client_message_id": "c1"}
                )
                seen = await frames_until(tab_b, _created, WAIT_S)  # the user sees it
                placeholder = seen[-1]
                assert proxy.frozen.is_set()
                a.process.kill()  # SIGKILL: right after the frame, before anything else
                await a.process.wait()
                seen += await frames_until(
                    tab_b, lambda f: f["type"] == "message.completed", WAIT_S
                )
            except (AssertionError, TimeoutError):
                raise AssertionError(f"the logs:\n{joined_logs([a, b])}") from None
            assert b.logged("resuming turn") == 1, joined_logs([a, b])
    await proxy.close()
    completed = seen[-1]
    assert placeholder["reply_to"] == "c1"
    assert completed["message_id"] == placeholder["message_id"]  # the same placeholder
    assert {f["message_id"] for f in seen if _created(f)} == {placeholder["message_id"]}
    assert completed["text"] == "answer to hello"
    assert len(model.held) == 1  # A never called the model; B called it once
