"""Malformed platform callbacks anyone can send: refused cleanly (4xx, one log line), never a 500.

The real slack-bolt app behind the gateway's `/slack/events`, and the Feishu channel's own
callback route, each against its fake platform.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time

import pytest

from agent.providers.scripted import ScriptedProvider
from tests.feishu_events import ENCRYPT_KEY, encrypt, message_event
from tests.feishu_fake import FakeFeishu
from tests.slack_app import Start, fake, post, slack
from tests.slack_events import SECRET, envelope, json_body, message, signed_headers
from tests.test_feishu_ingress import fake as feishu_fake
from tests.test_feishu_ingress import post as feishu_post
from tests.test_feishu_ingress import webhook

__all__ = ["fake", "feishu_fake", "slack"]  # fixtures

NOT_NUMBERS = ["nan", "inf", "-1e3", "12.5", "", "0x10", "１２３", "9" * 400]


@pytest.mark.parametrize("stamp", NOT_NUMBERS)
async def test_a_slack_timestamp_that_is_not_a_number_is_401_in_one_line(
    slack: Start, caplog: pytest.LogCaptureFixture, stamp: str
) -> None:
    provider = ScriptedProvider([])
    app = await slack(provider, mode="http", signing_secret=SECRET, app_token="")
    body, kind = json_body(envelope(message("hi", channel="D1")))
    headers = signed_headers(body) | {"X-Slack-Request-Timestamp": stamp}
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        status, _ = await post(app, body, kind, headers)
    assert status == 401
    lines = [
        r
        for r in caplog.records
        if r.levelno >= logging.INFO and "slack" in r.name and "connected" not in r.getMessage()
    ]
    assert len(lines) <= 1, [r.getMessage() for r in lines]
    assert not any(r.exc_info for r in caplog.records)
    assert not provider.requests


def _signed_with(stamp: str, body: bytes, nonce: str = "n-x") -> dict[str, str]:
    digest = hashlib.sha256((stamp + nonce + ENCRYPT_KEY).encode() + body).hexdigest()
    return {
        "X-Lark-Request-Timestamp": stamp,
        "X-Lark-Request-Nonce": nonce,
        "X-Lark-Signature": digest,
        "Content-Type": "application/json",
    }


@pytest.mark.parametrize("stamp", ["nan", "NaN", "inf", "-inf", "1e3", " 12", ""])
async def test_a_feishu_request_signed_with_a_timestamp_that_is_no_time_is_refused(
    feishu_fake: FakeFeishu, stamp: str
) -> None:
    payload = json.dumps(message_event("x")).encode()
    body = json.dumps({"encrypt": encrypt(payload, ENCRYPT_KEY)}).encode()
    async with webhook(feishu_fake) as (url, got):
        status, _ = await feishu_post(url, body, _signed_with(stamp, body))
    assert status == 401 and got.empty()


@pytest.mark.parametrize("where", ["inside", "outside"])
async def test_deeply_nested_json_in_a_signed_feishu_body_is_400(
    feishu_fake: FakeFeishu, caplog: pytest.LogCaptureFixture, where: str
) -> None:
    deep = b"[" * 200_000 + b"]" * 200_000
    if where == "inside":  # a genuine key's holder, or the key leaked: still no 500
        body = json.dumps({"encrypt": encrypt(deep, ENCRYPT_KEY)}).encode()
    else:
        body = deep
    async with webhook(feishu_fake) as (url, got):
        with caplog.at_level(logging.INFO):
            status, answer = await feishu_post(url, body, _signed_with(str(int(time.time())), body))
    assert status == 400 and answer == {"msg": "malformed body"} and got.empty()
    assert not any(r.exc_info for r in caplog.records)
