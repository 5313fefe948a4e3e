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
from bot.runtime.config import ConfigError
from content.texts import t
from tests.admin_kit import TOKEN as ADMIN_TOKEN
from tests.conftest import make_config
from tests.pairing_kit import code_in, gate_log
from tests.slack_events import button_press, envelope, message
from tests.slack_fake import APP_TOKEN, BOT_TOKEN, FakeSlack
from tests.telegram_fake import TOKEN as TELEGRAM_TOKEN
from tests.telegram_fake import FakeBotAPI

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
    await fake.wait_for(lambda: fake.connected > 0, timeout=30)
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
        assert (status, location) == (303, "/admin/pairing?done=approved")
        async with session.get(f"{app.url}{location}", headers=BEARER) as response:
            shown = await response.text()
        assert "Approved: the sender is told." in shown and "No pending codes." in shown
        assert "admin view" in shown  # who decided, in the approved list
        await fake.wait_for(lambda: len(_said(fake, "D1")) == 2, timeout=30)  # told at once
        assert _said(fake, "D1")[1] == t("en", "pairing.approved")
        status, _, text = await _decide(
            session, app, {"code": code, "decision": "approve", "form_token": form_token}
        )
        assert status == 404 and "No pending code" in text

    await fake.push("events_api", envelope(message("what now?", channel="D1", user="U9")))
    await provider.wait_requests(1)
    await app.gateway.wait_idle()
    await fake.wait_for(lambda: _said(fake, "D1")[-1] == "Welcome aboard.", timeout=30)


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


def _buttons(fake: FakeSlack, channel: str) -> list[tuple[str, str, str]]:
    """(action id, value, label) of every button the bot posted in `channel`."""
    return [
        (e["action_id"], e["value"], e["text"]["text"])
        for m in fake.bot_messages(channel)
        for block in m.blocks or []
        if block["type"] == "actions"
        for e in block["elements"]
    ]


async def test_operators_approve_from_their_slack_channel_once(
    tmp_path: Path, fake: FakeSlack, apps: list[App]
) -> None:
    provider = ScriptedProvider([Reply("Glad you're here.")])
    with gate_log() as gate:
        app = await _start(tmp_path, fake, apps, provider, place="slack:slack/COPS")
        await fake.push("events_api", envelope(message("hi", channel="D1", user="U9")))
        await gate.wait(1)
    code = code_in(_said(fake, "D1")[0])
    await fake.wait_for(lambda: len(fake.bot_messages("COPS")) == 1, timeout=30)
    [request] = fake.bot_messages("COPS")
    assert code in request.text and "U9" in request.text
    assert _buttons(fake, "COPS") == [
        ("pairing.approve", code, "Approve"),
        ("pairing.deny", code, "Deny"),
    ]
    for presses in (1, 2):  # pressed twice (a second operator, a double click): decided once
        press = button_press(
            "pairing.approve",
            value=code,
            label="Approve",
            channel="COPS",
            message_ts=request.ts,
            thread_ts=None,
        )
        await fake.push("interactive", press)
        await fake.wait_for(lambda: len(fake.thread("COPS", request.ts)) == presses, timeout=30)  # noqa: B023
    assert fake.thread("COPS", request.ts) == [
        "Approved by alice: U9 can talk with the bot now.",
        "That code is no longer pending (decided already, or expired).",
    ]
    await fake.wait_for(lambda: len(_said(fake, "D1")) == 2, timeout=30)
    assert _said(fake, "D1")[1] == t("en", "pairing.approved")
    await fake.push("events_api", envelope(message("so?", channel="D1", user="U9")))
    await provider.wait_requests(1)
    await app.gateway.wait_idle()
    await fake.wait_for(lambda: _said(fake, "D1")[-1] == "Glad you're here.", timeout=30)


async def test_only_named_approvers_decide_in_the_place(
    tmp_path: Path, fake: FakeSlack, apps: list[App]
) -> None:
    provider = ScriptedProvider([])
    with gate_log() as gate:
        await _start(tmp_path, fake, apps, provider, place="slack:slack/COPS", approvers=["U7"])
        await fake.push("events_api", envelope(message("hi", channel="D1", user="U9")))
        await gate.wait(1)
    await fake.wait_for(lambda: len(fake.bot_messages("COPS")) == 1, timeout=30)
    [request] = fake.bot_messages("COPS")
    code = code_in(_said(fake, "D1")[0])
    press = button_press(
        "pairing.approve",
        value=code,
        label="Approve",
        channel="COPS",
        message_ts=request.ts,
        thread_ts=None,
    )  # pressed by U1, not an approver
    await fake.push("interactive", press)
    await fake.wait_for(lambda: len(fake.thread("COPS", request.ts)) == 1, timeout=30)
    assert "pairing.approvers" in fake.thread("COPS", request.ts)[0]
    assert len(_said(fake, "D1")) == 1 and provider.requests == []


async def test_a_place_on_a_channel_that_does_not_run_stops_the_start(
    tmp_path: Path, fake: FakeSlack, apps: list[App]
) -> None:
    with pytest.raises(ConfigError, match="pairing.place: no enabled channel instance 'ops'"):
        await _start(tmp_path, fake, apps, ScriptedProvider([]), place="slack:ops/COPS")
    with pytest.raises(ConfigError, match="pairing.place"):
        make_config(tmp_path, pairing={"place": "#ops"})


async def test_a_telegram_stranger_is_approved_from_the_slack_place(
    tmp_path: Path, fake: FakeSlack, apps: list[App]
) -> None:
    telegram = FakeBotAPI(interval_s=0.05)
    await telegram.start()
    try:
        config = make_config(
            tmp_path,
            channels={
                "slack": {"enabled": True, "bot_token": BOT_TOKEN, "app_token": APP_TOKEN}
                | {"api_base": fake.url},
                "telegram": {"enabled": True, "token": TELEGRAM_TOKEN, "api_base": telegram.url}
                | {"dm_policy": "pairing"},
            },
            pairing={"place": "slack:slack/COPS"},
        )
        apps.append(App(config, base_dir=tmp_path, provider=ScriptedProvider([])))
        await apps[0].__aenter__()
        await fake.wait_for(lambda: fake.connected > 0, timeout=30)
        telegram.push(telegram.message(42, "hello", language_code="fr"))
        await fake.wait_for(lambda: len(fake.bot_messages("COPS")) == 1, timeout=30)
        [request] = fake.bot_messages("COPS")
        assert "telegram" in request.text and "u42" in request.text
        [(_, code, _), _] = _buttons(fake, "COPS")
        press = button_press(
            "pairing.approve",
            value=code,
            label="Approve",
            channel="COPS",
            message_ts=request.ts,
            thread_ts=None,
        )
        await fake.push("interactive", press)
        approved = t("fr", "pairing.approved")

        def told() -> list[str]:
            calls = telegram.ok(42, "sendMessage")
            return [telegram.messages[(42, c.message_id)] for c in calls]  # type: ignore[index]

        await telegram.wait_for(lambda: told()[-1:] == [approved], timeout=30)
        assert code_in(told()[0]) == code
    finally:
        for app in apps:  # before its fake goes: a polling channel must not outlive it
            await app.stop()
        await telegram.close()
