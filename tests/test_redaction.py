"""Credentials in `llm.base_url` (`user:password@`) reach no log line, no stored turn, no error."""

from __future__ import annotations

import logging
from pathlib import Path

import aiohttp
import pytest

from bot.runtime.config import ConfigError
from tests.conftest import Running, ask_once, db_rows, make_config
from tests.fake_anthropic import FakeAnthropic
from tests.fake_llm import fail
from tests.fake_openai import FakeOpenAI
from tools.redact import redact_credentials

SECRET = "s3cret"


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
async def test_a_password_in_the_base_url_is_in_no_log_and_no_turn(
    running: Running,
    session: aiohttp.ClientSession,
    caplog: pytest.LogCaptureFixture,
    vendor: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    fake = FakeOpenAI if vendor == "openai" else FakeAnthropic
    llm = fake(script=lambda body: fail(500, "server_error", "it broke"))
    # the URL's user:password goes as Basic auth, in place of the key (what a proxy in front wants)
    llm.api_key = None  # type: ignore[assignment]
    async with llm:
        base_url = llm.url.replace("http://", f"http://user:{SECRET}@")
        settings = {"provider": vendor, "model": "m", "api_key": "k", "max_retries": 1}
        app = await running(llm=settings | {"base_url": base_url, "retry_backoff_s": 0})
        completed, _ = await ask_once(session, app)
    assert len(llm.requests) == 2  # it reached the server, and failed there
    assert llm.requests[0].headers["Authorization"] == "Basic dXNlcjpzM2NyZXQ="  # user:s3cret
    [(error,)] = db_rows(app, "SELECT error FROM turns")
    assert error and "500" in error and SECRET not in error
    assert base_url.replace(f"user:{SECRET}@", "") in caplog.text  # named, without the password
    assert SECRET not in caplog.text
    assert SECRET not in str(completed)


def test_a_password_in_a_config_error_is_not_repeated(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        make_config(tmp_path, llm={"provider": f"http://user:{SECRET}@host/v1"})
    assert "provider" in str(caught.value) and SECRET not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://user:s3cret@127.0.0.1:8/v1", "http://***@127.0.0.1:8/v1"),
        ("at 'https://u:p@ss@host/x?a=b@c' now", "at 'https://***@host/x?a=b@c' now"),
        ("wss://token@host", "wss://***@host"),
        ("http://host/a@b and a@b.example", "http://host/a@b and a@b.example"),
    ],
)
def test_redact_credentials(text: str, expected: str) -> None:
    assert redact_credentials(text) == expected
