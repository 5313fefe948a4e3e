"""`log.format: json`: one turn followed by its ids across the gateway, the agent and a
specialist; message text not at INFO; tokens and keys at no level; `bot chat` keeps its log apart."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from agent.providers.scripted import Reply, ScriptedProvider
from bot.runtime.app import App
from bot.runtime.logs import Redact, secret_env_values, secret_values, setup_logging
from tests.agents_kit import TASK, Probe, Router, dispatch, registry_with, write_personas
from tests.conftest import ROOT, connect, db_rows, make_config, settled

TOKEN = "110201543:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"  # the shape of a Telegram bot token


@pytest.fixture(autouse=True)
def _record_fields() -> Iterator[None]:
    """`setup_logging` switches off, process-wide, the record fields no format of ours shows
    (bot/runtime/logs.py): put back, so the other tests' failure reports still show where a
    line came from."""
    switches = ("_srcfile", "logThreads", "logProcesses", "logMultiprocessing")
    before = {name: getattr(logging, name) for name in switches}
    yield
    for name, value in before.items():
        setattr(logging, name, value)


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    """The log as `bot serve` sets it up with `log.format: json`, into a buffer."""
    buffer = io.StringIO()
    root = logging.getLogger()
    level = root.level
    handler = setup_logging("DEBUG", "json", secrets=["webhook-secret-value"], stream=buffer)
    try:
        yield buffer
    finally:
        root.removeHandler(handler)
        handler.close()
        root.setLevel(level)


def lines(buffer: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


async def test_one_turn_is_followed_through_a_specialist(
    tmp_path: Path, session: aiohttp.ClientSession, json_log: io.StringIO
) -> None:
    router = Router(
        default=[Reply(calls=[dispatch("specialist-a", TASK)]), Reply("Armstrong and Aldrin.")],
        specialist_a=[Reply(calls=[("lookup", {"query": "crew"})]), Reply("Armstrong, Aldrin.")],
    )
    personas = write_personas(tmp_path / "personas")
    config = make_config(tmp_path, personas={"dirs": [str(personas)]})
    registry = registry_with(Probe())
    async with App(
        config, base_dir=tmp_path, provider=ScriptedProvider(router), registry=registry
    ) as app:
        client = await connect(session, app)
        await client.hello()
        assert (await client.ask("who walked on the moon?", "m1"))[
            "text"
        ] == "Armstrong and Aldrin."
        await settled(app)
        started = await client.seen(lambda f: f["type"] == "agent.started")
    [(turn_id, key)] = db_rows(app, "SELECT id, conversation_key FROM turns")
    logged = lines(json_log)
    assert all({"ts", "level", "logger", "message"} <= set(line) for line in logged)
    turn = [line for line in logged if line.get("turn_id") == turn_id]
    assert {line["conversation_key"] for line in turn} == {key}
    assert {line["channel"] for line in turn} == {"websocket"}
    assert {"bot.pipeline.turn", "agent.loop", "agent.workers"} <= {line["logger"] for line in turn}
    coordinator = [line for line in turn if "task_id" not in line]
    specialist = [line for line in turn if line.get("task_id") == started["task_id"]]
    assert {line["persona"] for line in coordinator} == {"default"}
    assert {line["persona"] for line in specialist} == {"specialist-a"}
    assert any(line["message"].startswith("tool AgentTool ok") for line in coordinator)
    assert any(line["message"].startswith("tool lookup ok") for line in specialist)
    assert any(line["logger"] == "agent.workers" for line in specialist)
    assert any(
        line["logger"] == "bot.pipeline.turn_line" and line["outcome"] == "completed"
        for line in turn
    )
    assert not [line for line in turn if "task_id" in line and line not in specialist]
    # lines outside any turn carry no turn's ids
    opened = [line for line in logged if "storage" in line["message"] and "open" in line["message"]]
    assert opened and all("turn_id" not in line for line in opened)


async def test_no_message_text_at_info(
    tmp_path: Path, session: aiohttp.ClientSession, json_log: io.StringIO
) -> None:
    logging.getLogger().setLevel(logging.INFO)
    config = make_config(tmp_path)
    provider = ScriptedProvider([Reply("the answer is marmalade")])
    async with App(config, base_dir=tmp_path, provider=provider) as app:
        client = await connect(session, app)
        await client.hello()
        await client.ask("my password is hunter2-swordfish", "m1")
        await app.gateway.wait_idle()
    text = json_log.getvalue()
    assert "serving http://" in text  # the log was written to
    assert "swordfish" not in text and "marmalade" not in text


def test_tokens_and_secrets_are_masked_at_every_level(json_log: io.StringIO) -> None:
    log = logging.getLogger("aiogram.event")  # any library's logger
    log.debug("POST https://api.telegram.org/bot%s/sendMessage", TOKEN)
    log.debug("key sk-ant-api03-Abcdefghijklmnop and Bearer abcdefghijklmnopqrstu")
    log.info("webhook secret: webhook-secret-value; proxy http://user:pw@proxy:3128")
    try:
        raise RuntimeError(f"refused token {TOKEN}")
    except RuntimeError:
        log.exception("failed")
    text = json_log.getvalue()
    for secret in (TOKEN, "sk-ant-api03-Abcdefghijklmnop", "abcdefghijklmnopqrstu", "pw@"):
        assert secret not in text
    assert "webhook-secret-value" not in text
    messages = [line["message"] for line in lines(json_log)]
    assert messages[0] == "POST https://api.telegram.org/bot[redacted]/sendMessage"
    assert messages[2] == "webhook secret: [redacted]; proxy http://***@proxy:3128"
    assert "RuntimeError: refused token [redacted]" in lines(json_log)[3]["exc"]


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        (TOKEN + " at the start", "[redacted] at the start"),
        ("xoxb-1234-5678-abcdefgh and xapp-1-A0-123-abcdef", "[redacted] and [redacted]"),
        ("sk-proj-abcdefghijklmnop,rk-abcdefghijklmnop", "[redacted],[redacted]"),
        ("Authorization: Bearer abc.def-ghi_jkl~mno==", "Authorization: Bearer [redacted]"),
        # inside a longer word or number: not a token's start, left alone
        ("taskxoxb-12345678 risk-abcdefghijklmnop 12345" + TOKEN, None),
        ("turn completed in 2 ms: model openai:bench-model, 1 call(s), user 0123456789", None),
    ],
)
def test_token_shapes_are_masked_where_they_start(text: str, masked: str | None) -> None:
    redact = Redact()
    assert redact.mask(text) == (text if masked is None else masked)


def test_a_log_call_whose_arguments_do_not_fit_is_logged_masked_not_raised(
    json_log: io.StringIO,
) -> None:
    logging.getLogger("some.library").warning("token %s refused in %s", TOKEN)
    [line] = lines(json_log)
    assert TOKEN not in line["message"] and "token %s refused in %s" in line["message"]


def test_the_secrets_of_the_config_are_found(tmp_path: Path) -> None:
    config = make_config(
        tmp_path,
        llm={"provider": "offline", "api_key": "llm-key-123456"},
        channels={"telegram": {"token": TOKEN, "webhook_secret": "hook-secret-1"}},
    )
    assert {"llm-key-123456", TOKEN, "hook-secret-1"} <= set(secret_values(config))
    env = {"ANTHROPIC_API_KEY": "ak-1", "SLACK_APP_TOKEN": "xapp-2", "HOME": "/root", "X_KEYS": "3"}
    assert set(secret_env_values(env)) == {"ak-1", "xapp-2"}


def test_a_urls_password_is_masked_not_the_whole_url(tmp_path: Path) -> None:
    """An operator must read which Redis it is; only a password is a secret."""
    plain = make_config(tmp_path, redis={"url": "redis://cache.internal:6379/0"})
    assert "redis://cache.internal:6379/0" not in set(secret_values(plain))
    with_password = make_config(
        tmp_path, storage={"url": "postgresql://bot:s%40cret-pw@db.internal:5432/bot"}
    )
    assert {"s%40cret-pw", "s@cret-pw"} <= set(secret_values(with_password))
    buffer = io.StringIO()
    root = logging.getLogger()
    before = root.level
    secrets = [*secret_values(plain), *secret_values(with_password)]
    handler = setup_logging("INFO", "json", secrets=secrets, stream=buffer)
    try:
        logging.getLogger("bot.redis.mode").info("Redis at %s", "redis://cache.internal:6379/0")
        logging.getLogger("x").info("the password is s@cret-pw")
    finally:
        root.removeHandler(handler)
        handler.close()
        root.setLevel(before)
    said = [line["message"] for line in lines(buffer)]
    assert said == ["Redis at redis://cache.internal:6379/0", "the password is [redacted]"]


@pytest.mark.process
def test_bot_chat_writes_json_lines_to_its_file_and_only_the_chat_to_the_terminal(
    tmp_path: Path,
) -> None:
    config = {
        "storage": {"path": str(tmp_path / "data" / "bot.db")},
        "personas": {"dirs": [str(ROOT / "personas")]},
        "log": {"level": "DEBUG", "format": "json"},
    }
    (tmp_path / "config.yaml").write_text(json.dumps(config))
    result = subprocess.run(
        [sys.executable, "-m", "bot", "chat"],
        input="hello there\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr
    assert "{" not in result.stdout and "DEBUG" not in result.stdout + result.stderr
    logged = [
        json.loads(line) for line in (tmp_path / "data" / "chat.log").read_text().splitlines()
    ]
    turn = [line for line in logged if "turn_id" in line]
    assert turn and {line["channel"] for line in turn} == {"terminal"}


async def test_the_turn_a_background_result_starts_has_its_own_ids(
    tmp_path: Path, session: aiohttp.ClientSession, json_log: io.StringIO
) -> None:
    hold = asyncio.Event()  # the specialist ends after the turn that started it
    router = Router(
        default=[
            Reply(calls=[dispatch("specialist-a", TASK, background=True)]),
            Reply("I started on it."),
            Reply("It was Armstrong."),  # the turn the background result starts
        ],
        specialist_a=[Reply("Armstrong.", wait=hold)],
    )
    personas = write_personas(tmp_path / "personas")
    config = make_config(tmp_path, personas={"dirs": [str(personas)]})
    registry = registry_with(Probe())
    provider = ScriptedProvider(router)
    async with App(config, base_dir=tmp_path, provider=provider, registry=registry) as app:
        client = await connect(session, app)
        await client.hello()
        await client.ask("who walked on the moon?", "m1")
        await app.gateway.wait_idle()
        hold.set()
        await settled(app)
    rows = db_rows(app, "SELECT id, inbound_event_ids FROM turns ORDER BY created_at")
    [result_turn] = [turn_id for turn_id, events in rows if "task:" in events]
    logged = [line for line in lines(json_log) if line.get("turn_id") == result_turn]
    assert logged and all("task_id" not in line for line in logged)
    assert {line["persona"] for line in logged} == {"default"}


async def test_every_turn_writes_one_info_line_that_jq_finds_by_turn_id(
    tmp_path: Path, session: aiohttp.ClientSession, json_log: io.StringIO
) -> None:
    logging.getLogger().setLevel(logging.INFO)
    router = Router(
        default=[Reply(calls=[dispatch("specialist-a", TASK)]), Reply("Armstrong and Aldrin.")],
        specialist_a=[Reply(calls=[("lookup", {"query": "crew"})]), Reply("Armstrong, Aldrin.")],
    )
    personas = write_personas(tmp_path / "personas")
    config = make_config(tmp_path, personas={"dirs": [str(personas)]})
    async with App(
        config,
        base_dir=tmp_path,
        provider=ScriptedProvider(router),
        registry=registry_with(Probe()),
    ) as app:
        client = await connect(session, app)
        await client.hello(visitor_id="visitor-0042")
        await client.ask("who walked on the moon?", "m1")
        await settled(app)
    [(turn_id, key)] = db_rows(app, "SELECT id, conversation_key FROM turns")
    [(calls, tokens_in, tokens_out)] = db_rows(
        app, "SELECT count(*), sum(input_tokens), sum(output_tokens) FROM usage"
    )
    [line] = [
        line for line in lines(json_log) if line.get("turn_id") == turn_id and "outcome" in line
    ]
    assert line["level"] == "INFO" and line["conversation_key"] == key
    assert line["channel"] == "websocket" and line["outcome"] == "completed"
    assert line["model_calls"] == calls == 4  # the specialist's two calls counted too
    assert (line["input_tokens"], line["output_tokens"]) == (tokens_in, tokens_out)
    assert line["model"].startswith("scripted:") and line["duration_ms"] >= 0
    assert len(line["user"]) == 16 and "visitor" not in line["user"]  # hashed


@pytest.mark.parametrize("level", ["INFO", "DEBUG"])
@pytest.mark.parametrize("library", ["httpx", "httpx2"])
def test_httpx_request_lines_are_debug_lines(level: str, library: str) -> None:
    """lark-oapi calls Feishu through httpx, the model SDKs through httpx2: both log each
    request at INFO."""
    buffer = io.StringIO()
    root = logging.getLogger()
    before = root.level
    handler = setup_logging(level, "json", stream=buffer)
    try:
        logging.getLogger(library).info('HTTP Request: POST https://open.feishu.cn/x "200 OK"')
        logging.getLogger(library).warning("a warning stays a warning")
    finally:
        root.removeHandler(handler)
        handler.close()
        root.setLevel(before)
    shown = [(line["level"], line["message"][:13]) for line in lines(buffer)]
    request = [("DEBUG", "HTTP Request:")] if level == "DEBUG" else []
    assert shown == [*request, ("WARNING", "a warning sta")]


def test_a_line_is_made_without_walking_the_stack(json_log: io.StringIO) -> None:
    """No format shows where a line came from, so the record is made without finding out."""
    kept: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            kept.append(record)

    keep = Keep()
    logging.getLogger().addHandler(keep)
    try:
        logging.getLogger("bot.test").info("made cheaply")
    finally:
        logging.getLogger().removeHandler(keep)
    [record] = kept
    assert (record.lineno, record.threadName, record.process) == (0, None, None)
    assert lines(json_log)[-1]["message"] == "made cheaply"
