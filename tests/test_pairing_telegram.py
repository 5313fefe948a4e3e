"""Pairing on Telegram (aiogram against the fake Bot API) with `bot pairing` run as the admin would:
one code per sender, approved (told in their language, then the model answers), expired,
denied, the cap on pending codes, and a sender spamming DMs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent.providers.scripted import Reply, ScriptedProvider
from bot.pipeline.pairing_codes import new_code
from bot.runtime.app import App
from bot.runtime.cli import main
from content.texts import t
from tests.conftest import make_config
from tests.pairing_kit import code_in, gate_log
from tests.telegram_fake import TOKEN, FakeBotAPI

QUIET = {"resend_s": 3600}  # a pending code is not sent twice within a test


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotAPI]:
    api = FakeBotAPI(interval_s=0.05)
    await api.start()
    yield api
    await api.close()


@pytest.fixture
async def apps() -> AsyncIterator[list[App]]:
    started: list[App] = []
    yield started
    for app in started:
        await app.stop()


async def _start(
    tmp_path: Path, fake: FakeBotAPI, apps: list[App], provider: ScriptedProvider, **pairing: Any
) -> App:
    channel = {"enabled": True, "token": TOKEN, "api_base": fake.url, "dm_policy": "pairing"}
    config = make_config(tmp_path, channels={"telegram": channel}, pairing=QUIET | pairing)
    app = App(config, base_dir=tmp_path, provider=provider)
    await app.__aenter__()
    apps.append(app)
    await fake.wait_for(lambda: any(c.method == "getupdates" for c in fake.calls), timeout=30)
    return app


def _said(fake: FakeBotAPI, chat: int) -> list[str]:
    return [fake.messages[(chat, c.message_id)] for c in fake.ok(chat, "sendMessage")]  # type: ignore[index]


async def _cli(tmp_path: Path, *args: str) -> int:
    """`bot pairing ...` on the app's config, as a shell would run it (its own event loop)."""
    return await asyncio.to_thread(
        main, ["pairing", *args, "--config", str(tmp_path / "config.yaml")]
    )


async def test_a_stranger_gets_one_code_is_approved_told_and_then_answered(
    tmp_path: Path, fake: FakeBotAPI, apps: list[App], capsys: pytest.CaptureFixture[str]
) -> None:
    provider = ScriptedProvider([Reply("Hallo, schön dich zu sehen.")])
    with gate_log() as gate:
        app = await _start(tmp_path, fake, apps, provider)
        fake.push(fake.message(42, "Hallo?", language_code="de"))
        fake.push(fake.message(42, "Ist da jemand?"))
        fake.push(fake.message(42, "Hallo??"))
        await gate.wait(3)
    [told] = _said(fake, 42)  # one code, not one per message
    code = code_in(told)
    assert "Kopplungscode" in told and "60 Minuten" in told
    assert provider.requests == []  # nothing reached the model

    assert await _cli(tmp_path, "list") == 0
    listed = capsys.readouterr().out
    assert code in listed and "42" in listed and "u42" in listed
    assert await _cli(tmp_path, "approve", f"{code[:4].lower()}-{code[4:]}") == 0
    assert "approved 42 (u42) on telegram" in capsys.readouterr().out
    await fake.wait_for(
        lambda: len(_said(fake, 42)) == 2, timeout=30
    )  # told by the running gateway
    assert _said(fake, 42)[1] == t("de", "pairing.approved")

    fake.push(fake.message(42, "Wie geht's?"))
    await provider.wait_requests(1)
    await app.gateway.wait_idle()
    await fake.wait_for(lambda: _said(fake, 42)[-1:] == ["Hallo, schön dich zu sehen."], timeout=30)
    assert "Wie geht's?" in str(provider.requests[0].messages[-1].content)
    # a code is used once
    assert await _cli(tmp_path, "approve", code) == 1
    assert "no pending code" in capsys.readouterr().err
    assert await _cli(tmp_path, "list", "--approved") == 0
    assert "cli:" in capsys.readouterr().out
    # revoked: the next message pairs anew, the model is not called
    assert await _cli(tmp_path, "revoke", "telegram", "42") == 0
    assert "revoked 42 on telegram" in capsys.readouterr().out
    assert await _cli(tmp_path, "revoke", "telegram", "42") == 1
    with gate_log() as gate:
        fake.push(fake.message(42, "Noch da?"))
        await gate.wait(1)
    assert gate.verdicts == ["telegram/42 issued, told: True"]
    assert code_in(_said(fake, 42)[-1]) != code and len(provider.requests) == 1


async def test_an_expired_code_is_replaced_and_cannot_be_approved(
    tmp_path: Path, fake: FakeBotAPI, apps: list[App]
) -> None:
    provider = ScriptedProvider([])
    with gate_log() as gate:
        app = await _start(tmp_path, fake, apps, provider, ttl_s=600)
        fake.push(fake.message(7, "hi"))
        await gate.wait(1)
        old = code_in(_said(fake, 7)[0])
        assert app.gateway.pairing is not None
        app.gateway.pairing.clock = lambda: time.time() + 601  # the code's ten minutes are up
        fake.push(fake.message(7, "hello?"))
        await gate.wait(2)
    assert gate.verdicts[1] == "telegram/7 issued, told: True"
    new = code_in(_said(fake, 7)[1])
    assert new != old
    assert await _cli(tmp_path, "approve", old) == 1
    assert provider.requests == []


async def test_a_denied_sender_draws_nothing_more(
    tmp_path: Path, fake: FakeBotAPI, apps: list[App], capsys: pytest.CaptureFixture[str]
) -> None:
    provider = ScriptedProvider([])
    with gate_log() as gate:
        await _start(tmp_path, fake, apps, provider, resend_s=0)
        fake.push(fake.message(9, "let me in"))
        await gate.wait(1)
        code = code_in(_said(fake, 9)[0])
        assert await _cli(tmp_path, "deny", code) == 0
        assert "denied 9 (u9) on telegram" in capsys.readouterr().out
        fake.push(fake.message(9, "please"))
        fake.push(fake.message(9, "please!"))
        await gate.wait(3)
    assert gate.verdicts[1:] == ["telegram/9 denied, told: False"] * 2
    assert len(_said(fake, 9)) == 1 and provider.requests == []
    assert await _cli(tmp_path, "approve", code) == 1  # decided once


async def test_pending_codes_are_capped_and_a_spammer_is_answered_once_per_resend(
    tmp_path: Path, fake: FakeBotAPI, apps: list[App]
) -> None:
    provider = ScriptedProvider([])
    with gate_log() as gate:
        await _start(tmp_path, fake, apps, provider, max_pending=2, resend_s=0)
        for chat in (101, 102, 103, 104):
            fake.push(fake.message(chat, "hi"))
        await gate.wait(4)
        told = {chat: _said(fake, chat) for chat in (101, 102, 103, 104)}
        assert sorted(len(texts) for texts in told.values()) == [0, 0, 1, 1]  # two slots
        assert sum(v.endswith("full, told: False") for v in gate.verdicts) == 2
        # with resend_s 0 a waiting sender's every message resends the same code
        chat = next(c for c, texts in told.items() if texts)
        fake.push(fake.message(chat, "again"))
        await gate.wait(5)
    again = _said(fake, chat)
    assert len(again) == 2 and code_in(again[1]) == code_in(again[0])
    assert provider.requests == []


async def test_a_spammer_within_resend_s_draws_nothing(
    tmp_path: Path, fake: FakeBotAPI, apps: list[App]
) -> None:
    provider = ScriptedProvider([])
    with gate_log() as gate:
        await _start(tmp_path, fake, apps, provider)  # resend_s: an hour
        for n in range(20):
            fake.push(fake.message(55, f"spam {n}"))
        await gate.wait(20)
    assert len(_said(fake, 55)) == 1
    assert gate.verdicts.count("telegram/55 pending, told: False") == 19
    assert provider.requests == []


async def test_allowlisted_users_and_groups_skip_the_gate(
    tmp_path: Path, fake: FakeBotAPI, apps: list[App]
) -> None:
    provider = ScriptedProvider([Reply("Hi, friend."), Reply("Hi, group.")])
    channel = {
        "enabled": True,
        "token": TOKEN,
        "api_base": fake.url,
        "dm_policy": "pairing",
        "allowed_users": ["77"],
        "group_reply": "all",
    }
    config = make_config(tmp_path, channels={"telegram": channel})
    app = App(config, base_dir=tmp_path, provider=provider)
    await app.__aenter__()
    apps.append(app)
    fake.push(fake.message(77, "hello"))
    await provider.wait_requests(1)
    await app.gateway.wait_idle()
    await fake.wait_for(lambda: _said(fake, 77) == ["Hi, friend."], timeout=30)
    fake.push(fake.message(-100, "hello all", user_id=78))  # a group: the allowlist as ever
    await fake.wait_for(lambda: len(fake.ok(-100, "sendMessage")) == 1, timeout=30)
    assert provider.requests[1:] == []  # refused: 78 is not listed


async def test_codes_typed_into_the_chat_approve_nobody(
    tmp_path: Path, fake: FakeBotAPI, apps: list[App], capsys: pytest.CaptureFixture[str]
) -> None:
    """Brute force from the chat side: a stranger sending codes (guesses, even another
    sender's real one) gets its own one code and nothing else; only an admin approves."""
    provider = ScriptedProvider([])
    with gate_log() as gate:
        await _start(tmp_path, fake, apps, provider)
        fake.push(fake.message(42, "hi"))
        await gate.wait(1)
        victim = code_in(_said(fake, 42)[0])
        guesses = [new_code() for _ in range(30)] + [victim, f"/start {victim}"]
        for guess in guesses:
            fake.push(fake.message(43, guess))
        await gate.wait(1 + len(guesses))
    assert len(_said(fake, 43)) == 1 and code_in(_said(fake, 43)[0]) != victim
    assert len(_said(fake, 42)) == 1  # the code's owner is not told of any approval
    assert provider.requests == []
    assert await _cli(tmp_path, "list") == 0
    listed = capsys.readouterr().out
    assert victim in listed and listed.count("\n") == 3  # the head and two pending codes
