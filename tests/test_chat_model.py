"""Per-chat model and persona: `/model` lists, switches and goes back, and the next turn's request
reaches the chosen model's own fake server; an answer a backup model gave says so once.

Every model is a real OpenAI SDK client pointed at its own local fake (tests/fake_openai.py):
which server received a request is the proof of which model answered.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import ClientSession

from agent.log_context import bound
from agent.providers.metered import ModelCall
from bot.pipeline.turn_line import TALLIES, tallying
from tests.conftest import Running, WsClient, connect, db_rows
from tests.fake_llm import Reply, fail, llm_config
from tests.fake_openai import FakeOpenAI

MINI = "GPT mini"


@pytest.fixture
async def default_model() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
async def mini_model() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(api_key="mini-key") as fake:
        yield fake


def choice(fake: FakeOpenAI, **extra: Any) -> dict[str, Any]:
    return {
        "name": "mini",
        "provider": "openai",
        "model": "mini-model",
        "base_url": fake.url,
        "api_key": fake.api_key,
        "display": MINI,
        "price": {"input_per_mtok": 0.15, "output_per_mtok": 0.6},
        **extra,
    }


async def _client(session: ClientSession, app: Any) -> WsClient:
    client = await connect(session, app)
    await client.hello()
    return client


async def test_model_lists_switches_and_goes_back(
    running: Running,
    default_model: FakeOpenAI,
    mini_model: FakeOpenAI,
    session: ClientSession,
) -> None:
    default_model.add(Reply(["From the default."]), Reply(["Default again."]))
    mini_model.add(Reply(["From mini."]))
    app = await running(llm=llm_config("openai", default_model, choices=[choice(mini_model)]))
    client = await _client(session, app)

    listing = (await client.ask("/model"))["text"]
    assert "• default — test-model (current)" in listing
    assert f"• mini — {MINI} ($0.15 in / $0.6 out per million tokens)" in listing
    assert (await client.ask("/model nope"))["text"] == (
        "There is no model “nope” here. Choose one of: default, mini."
    )

    assert (await client.ask("hello"))["text"] == "From the default."  # no note: the default
    assert (await client.ask("/model MINI"))["text"] == f"This conversation now uses {MINI}."
    assert (
        "• mini — GPT mini ($0.15 in / $0.6 out per million tokens) (current)"
        in ((await client.ask("/model"))["text"])
    )
    answer = await client.ask("and now?")
    assert answer["text"] == f"From mini.\n\n— answered by {MINI}"
    assert len(mini_model.requests) == 1 and len(default_model.requests) == 1
    request = mini_model.requests[0]
    assert request.body["model"] == "mini-model" and request.api_key == "mini-key"
    # the history went with it; the note did not (the model never reads its own footers)
    sent = [m["content"] for m in request.body["messages"] if m["role"] == "assistant"]
    assert sent == ["From the default."]

    back = (await client.ask("/model default"))["text"]
    assert back == "Back to the default model (test-model)."
    assert (await client.ask("last one"))["text"] == "Default again."
    assert len(mini_model.requests) == 1 and len(default_model.requests) == 2
    # usage is attributed to the model that served each call
    rows = db_rows(app, "select model from usage order by id")
    assert [r[0] for r in rows] == ["test-model", "mini-model", "test-model"]


async def test_a_model_offered_on_another_channel_is_not_offered_here(
    running: Running,
    default_model: FakeOpenAI,
    mini_model: FakeOpenAI,
    session: ClientSession,
) -> None:
    app = await running(
        llm=llm_config("openai", default_model, choices=[choice(mini_model, channels=["api"])]),
    )
    client = await _client(session, app)
    assert (await client.ask("/model"))["text"] == (
        "This conversation uses test-model; no other model is offered here."
    )
    refused = (await client.ask("/model mini"))["text"]
    assert refused == "There is no model “mini” here. Choose one of: default."


async def test_a_failed_over_answer_says_so_once(
    running: Running,
    default_model: FakeOpenAI,
    mini_model: FakeOpenAI,
    session: ClientSession,
) -> None:
    """The default model fails; the fallback answers: the answer carries one note naming it, in
    the same (final) message, nothing sent twice. The next turn skips the failed model (its
    circuit is open) and is a backup's answer too: it says so as well, never silently."""
    default_model.add(fail(500, "server_error"))
    mini_model.add(Reply(["Backup answer."]), Reply(["Backup again."]))
    backup = {"provider": "openai", "model": "backup-model", "base_url": mini_model.url,
              "api_key": mini_model.api_key}  # fmt: skip
    app = await running(
        llm=llm_config(
            "openai", default_model, fallback=[backup], max_retries=0, circuit_open_s=600
        )
    )
    client = await _client(session, app)
    start = len(client.frames)
    answer = await client.ask("hello")
    note = "answered by the backup model (backup-model): the usual one did not answer"
    assert answer["text"] == f"Backup answer.\n\n— {note}"
    frames = client.frames[start:]
    assert sum(f["type"] == "message.created" for f in frames) == 1  # one message, no second
    assert sum(note in f.get("text", "") for f in frames) == 1  # said once: only the final
    assert (await client.ask("again"))["text"] == f"Backup again.\n\n— {note}"
    assert [len(default_model.requests), len(mini_model.requests)] == [1, 2]


async def test_persona_switches_the_conversation_and_new_starts_its_history_afresh(
    running: Running, default_model: FakeOpenAI, session: ClientSession
) -> None:
    default_model.add(Reply(["coordinator"]), Reply(["researcher 1"]), Reply(["researcher 2"]))
    default_model.add(Reply(["researcher fresh"]), Reply(["coordinator again"]))
    app = await running(
        llm=llm_config("openai", default_model),
        personas={"switchable": ["specialist-research"]},
    )
    client = await _client(session, app)
    listing = (await client.ask("/persona"))["text"]
    assert "• specialist-research — Researches a question" in listing
    assert (await client.ask("/persona nobody"))["text"].startswith("There is no assistant")
    await client.ask("hi")
    switched = (await client.ask("/persona specialist-research"))["text"]
    assert switched == "This conversation is now with Researcher."
    await client.ask("look something up")
    await client.ask("and more")

    def system(n: int) -> str:
        return str(default_model.requests[n].body["messages"][0]["content"])

    def said(n: int) -> list[str]:
        messages = default_model.requests[n].body["messages"]
        return [m["content"] for m in messages if m["role"] == "user"]

    assert system(1).startswith("You are a research specialist")
    assert not system(0).startswith("You are a research specialist")
    assert said(1) == ["look something up"]  # the researcher's own session: not the coordinator's
    assert said(2) == ["look something up", "and more"]
    await client.ask("/new")  # the switched persona's session is the one closed
    await client.ask("fresh")
    assert said(3) == ["fresh"] and system(3).startswith("You are a research specialist")
    await client.ask("/persona default")
    await client.ask("back")
    assert said(4) == ["hi", "back"]  # the coordinator's session: /new closed the other one


def test_only_the_coordinators_fallback_marks_its_answer() -> None:
    """A specialist's call that failed over is its own (its result says nothing of models); the
    answer is marked only when the coordinator's chain moved on."""
    with tallying() as tally:
        with bound(task_id="t1", persona="specialist-research"):
            TALLIES.model_fallback("openai", "anthropic")
            TALLIES.model_call(ModelCall("anthropic", "backup", "ok", 0.1, 0.05))
        assert (tally.failed_over, tally.served_by) == (False, None)
        TALLIES.model_call(ModelCall("openai", "main", "ok", 0.1, 0.05))
        assert (tally.failed_over, tally.served_by) == (False, "main")
        TALLIES.model_fallback("openai", "anthropic")
        TALLIES.model_call(ModelCall("anthropic", "backup", "ok", 0.1, 0.05))
        assert (tally.failed_over, tally.served_by) == (True, "backup")
