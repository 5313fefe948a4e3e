"""Pairing across processes (`redis.url`): two apps on one Redis prefix and one database. A code
issued by one is approved on the other's admin view; the sender is told once, on whichever
connection they hold, and their next message, taken by the other process, reaches the model."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import aiohttp
import pytest

from agent.providers.scripted import Reply, ScriptedProvider
from bot.runtime.app import App
from bot.storage import StorageError
from bot.storage.pairings import PairingRequest
from content.texts import t
from tests.admin_kit import TOKEN as ADMIN_TOKEN
from tests.conftest import connect, make_config
from tests.pairing_kit import code_in
from tests.redis_kit import URL, prefix
from tests.test_storage_faults import fill_the_disk, free_the_disk, sqlite

__all__ = ["prefix"]

FILLER = PairingRequest("x", "u", "{}", None, None, "ABCD2345", time.time(), 60, 1, 60)


@pytest.fixture
async def apps() -> AsyncIterator[list[App]]:
    started: list[App] = []
    yield started
    for app in started:
        await app.stop()


BEARER = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


async def test_a_code_from_one_process_is_approved_on_another(
    prefix: str, tmp_path: Path, apps: list[App], session: aiohttp.ClientSession
) -> None:
    sections = {
        "redis": {"url": URL, "prefix": prefix, "lease_s": 4},
        "channels": {"websocket": {"dm_policy": "pairing"}},
        "admin": {"token": ADMIN_TOKEN},
    }
    provider = ScriptedProvider([Reply("Now we can talk.")])
    config = make_config(tmp_path, **sections)
    for _ in range(2):  # one database file, one Redis prefix: two processes' worth
        apps.append(App(config, base_dir=tmp_path, provider=provider))
        await apps[-1].__aenter__()
    first, second = apps
    visitor = await connect(session, first)
    await visitor.hello()
    told = await visitor.ask("hello", client_message_id="c1")
    code = code_in(told["text"])
    assert provider.requests == []

    async with session.get(f"{second.url}/admin/pairing", headers=BEARER) as response:
        page = await response.text()
    assert code in page
    found = re.search(r'name="form_token" value="([0-9a-f]+)"', page)
    assert found is not None
    form = {"code": code, "decision": "approve", "form_token": found.group(1)}
    async with session.post(
        f"{second.url}/admin/pairing", data=form, headers=BEARER, allow_redirects=False
    ) as response:
        assert response.status == 303
    notice = await visitor.until(
        lambda f: f["type"] == "message.completed" and f["text"] == t("en", "pairing.approved"),
        timeout=15,
    )
    assert notice

    # the same visitor on the other process: approved there too
    again = await connect(session, second)
    await again.hello()
    answered = await again.ask("so?", client_message_id="c2")
    assert answered["text"] == "Now we can talk."
    notices = [
        f
        for f in visitor.frames
        if f.get("text") == t("en", "pairing.approved") and f["type"] == "message.completed"
    ]
    assert len(notices) == 1


async def test_a_gate_the_store_refuses_answers_honestly_and_keeps_the_message_takeable(
    prefix: str,
    tmp_path: Path,
    apps: list[App],
    session: aiohttp.ClientSession,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The claim is Redis's, the pairing the database's: a full disk at the gate is "try again"
    with the claim released, so the same message sent again is taken and draws its code."""
    sections = {
        "redis": {"url": URL, "prefix": prefix, "lease_s": 4},
        "channels": {"websocket": {"dm_policy": "pairing"}},
    }
    apps.append(App(make_config(tmp_path, **sections), base_dir=tmp_path))
    app = await apps[0].__aenter__()
    store = sqlite(app)
    visitor = await connect(session, app)
    await visitor.hello()
    await fill_the_disk(store)
    for n in range(10_000):  # and the pairings table's pages
        try:
            await store.pairing_request(replace(FILLER, channel=f"filler-{n}"))
        except StorageError:
            break
    refused = await visitor.ask("hello", client_message_id="c1")
    assert refused["text"] == t("en", "gateway.not_taken")
    assert any("not paired" in r.getMessage() for r in caplog.records)  # the gate's refusal
    free_the_disk(store)
    await visitor.send(type="message", text="hello", client_message_id="c1")  # the same event
    told = await visitor.until(
        lambda f: f["type"] == "message.completed" and f["text"] != refused["text"]
    )
    assert code_in(told["text"])
