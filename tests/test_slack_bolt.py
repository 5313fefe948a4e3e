"""Bolt is handed the `auth.test` answer the channel got at start (adapters/slack/bolt.py), and a
Bolt that keeps its middleware elsewhere is left to make its own call: logged, not broken."""

import logging
from types import SimpleNamespace
from typing import Any, cast

import pytest
from slack_bolt.async_app import AsyncApp
from slack_bolt.middleware.authorization.async_single_team_authorization import (
    AsyncSingleTeamAuthorization,
)
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.bolt import hand_auth_test

AUTH: Any = {"ok": True, "user_id": "UBOT", "bot_id": "BBOT", "team_id": "T1"}


async def test_bolt_keeps_the_answer_it_is_handed() -> None:
    app = AsyncApp(client=AsyncWebClient(token="xoxb-test"), signing_secret="secret")
    assert hand_auth_test(app, AUTH)
    [authorization] = [
        m for m in app._async_middleware_list if isinstance(m, AsyncSingleTeamAuthorization)
    ]
    assert authorization.auth_test_result is AUTH  # so no auth.test of its own on the first event


def test_a_bolt_without_the_middleware_list_makes_its_own_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    moved = cast(Any, SimpleNamespace(middleware=[]))  # a release that renamed the list
    with caplog.at_level(logging.INFO, logger="adapters.slack.bolt"):
        assert not hand_auth_test(moved, AUTH)
        assert not hand_auth_test(moved, AUTH)
    said = [r.getMessage() for r in caplog.records if r.name == "adapters.slack.bolt"]
    assert len(said) <= 1 and all("its own auth.test" in line for line in said)
