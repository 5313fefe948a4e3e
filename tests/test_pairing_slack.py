"""Pairing on Slack (slack_sdk in socket mode against the fake Slack), decided in the admin view:
one code per sender, the form refused without its token, approved (told, then answered),
denied from the view, the cap on pending codes."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession

from agent.providers.scripted import Reply, ScriptedProvider
from bot.runtime.app import App
from content.texts import t
from tests.admin_kit import TOKEN as ADMIN_TOKEN
from tests.conftest import make_config
from tests.pairing_kit import code_in, gate_log
from tests.slack_events import envelope, message
from tests.slack_fake import APP_TOKEN, BOT_TOKEN, FakeSlack

BEARER = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
FORM_TOKEN = re.compile(r'name="form_token" value="([0-9a-f]+)"')


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    slack = FakeSlack()
    await slack.start()
    yield slack
    await slack.close()


@pytest.fixture
async def apps() -> AsyncIterator[list[App]]:
    started: list[App] = []
    yield started
    for app in started:
        await app.stop()


async def _start(
    tmp_path: Path, fake: FakeSlack, apps: list[App], provider: ScriptedProvider, **pairing: Any
) -> App:
    section = {
        "enabled": True,
        "bot_token": BOT_TOKEN,
        "app_token": APP_TOKEN,
        "api_base": fake.url,
        "edit_interval_s": 0.1,
        "dm_policy": "pairing",
    }
    config = make_config(
        tmp_path,
        channels={"slack": section},
        admin={"token": ADMIN_TOKEN},
        pairing={"resend_s": 3600} | pairing,
    )
    app = App(config, base_dir=tmp_path, provider=provider)
    await app.__aenter__()
    apps.append(app)
    await fake.wait_for(lambda: fake.connected > 0)
    return app


def _said(fake: FakeSlack, channel: str) -> list[str]:
    return [m.text for m in fake.bot_messages(channel)]


async def _form_token(session: ClientSession, app: App) -> tuple[str, str]:
    async with session.get(f"{app.url}/admin/pairing", headers=BEARER) as response:
        assert response.status == 200
        page = await response.text()
    found = FORM_TOKEN.search(page)
    assert found is not None
    return found.group(1), page


async def _decide(session: ClientSession, app: App, form: dict[str, str]) -> tuple[int, str, str]:
    async with session.post(
        f"{app.url}/admin/pairing", data=form, headers=BEARER, allow_redirects=False
    ) as response:
        return response.status, response.headers.get("Location", ""), await response.text()


async def test_a_slack_stranger_is_approved_in_the_admin_view_told_and_answered(
    tmp_path: Path, fake: FakeSlack, apps: list[App]
) -> None:
    provider = ScriptedProvider([Reply("Welcome aboard.")])
    with gate_log() as gate:
        app = await _start(tmp_path, fake, apps, provider)
        await fake.push("events_api", envelope(message("hello", channel="D1", user="U9")))
        await fake.push("events_api", envelope(message("anyone?", channel="D1", user="U9")))
        await gate.wait(2)
    [told] = _said(fake, "D1")
    code = code_in(told)
    assert provider.requests == []

    async with ClientSession() as session:
        form_token, page = await _form_token(session, app)
        assert code in page and "U9" in page
        # a form from elsewhere (no token, a wrong one) decides nothing
        for bad in ({}, {"form_token": "0" * 64}):
            status, _, _ = await _decide(session, app, {"code": code, "decision": "approve"} | bad)
            assert status == 403
        assert code in (await _form_token(session, app))[1]
        status, location, _ = await _decide(
            session, app, {"code": code, "decision": "approve", "form_token": form_token}
        )
        assert status == 303 and location.startswith("/admin/pairing?done=approved")
        await fake.wait_for(lambda: len(_said(fake, "D1")) == 2)  # told at once
        assert _said(fake, "D1")[1] == t("en", "pairing.approved")
        status, _, text = await _decide(
            session, app, {"code": code, "decision": "approve", "form_token": form_token}
        )
        assert status == 404 and "No pending code" in text

    await fake.push("events_api", envelope(message("what now?", channel="D1", user="U9")))
    await provider.wait_requests(1)
    await app.gateway.wait_idle()
    await fake.wait_for(lambda: _said(fake, "D1")[-1] == "Welcome aboard.")


async def test_slack_pending_codes_are_capped_and_a_denial_frees_a_slot(
    tmp_path: Path, fake: FakeSlack, apps: list[App]
) -> None:
    provider = ScriptedProvider([])
    with gate_log() as gate:
        app = await _start(tmp_path, fake, apps, provider, max_pending=1)
        await fake.push("events_api", envelope(message("hi", channel="D1", user="U1")))
        await gate.wait(1)
        await fake.push("events_api", envelope(message("hi", channel="D2", user="U2")))
        await gate.wait(2)
        assert gate.verdicts[1] == "slack/U2 full, told: False"
        assert _said(fake, "D2") == []
        async with ClientSession() as session:
            form_token, _ = await _form_token(session, app)
            code = code_in(_said(fake, "D1")[0])
            status, location, _ = await _decide(
                session, app, {"code": code, "decision": "deny", "form_token": form_token}
            )
            assert status == 303 and "denied" in location
        await fake.push("events_api", envelope(message("hi?", channel="D1", user="U1")))
        await fake.push("events_api", envelope(message("hi?", channel="D2", user="U2")))
        await gate.wait(4)
    assert len(_said(fake, "D1")) == 1  # denied: nothing more, not even a notice
    [second] = _said(fake, "D2")  # the freed slot
    assert code_in(second) != code
    assert provider.requests == []
