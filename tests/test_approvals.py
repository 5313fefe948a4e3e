"""Approvals before sensitive tools, through the real web socket and the whole gateway.

A scripted model calls `create_payment` (which declares that it needs approval): the turn
pauses with the call shown and three buttons (a `confirm` display hint) in the same live
message; an `action` frame answers it; the turn goes on in the same message. Orders are counted
in the store: allowed once -> one order; denied, expired, withdrawn -> none; a replayed press ->
still one. Every decision is in the audit log (who, when, what).
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession

from agent.providers.scripted import Reply, ScriptedProvider
from bot.runtime.app import App
from bot.runtime.config import ConfigError
from tests.api_kit import ApiClient, api_section
from tests.conftest import Running, WsClient, connect, db_rows, eventually, make_config
from tests.redis_kit import URL, prefix

__all__ = ["prefix"]  # fixture

PAY = ("create_payment", {"service": "ASSESSMENT", "category": "QMAS", "method": "CARD"})
PERSONA = "---\nname: default\ndescription: Sells.\ntools: [create_payment]\n---\nSell.\n"
PAYMENT = {"currency": "CNY", "prices": {"ASSESSMENT": {"QMAS": 99}}}
WAIT_S = 30.0  # hang guards only: a loaded machine is slow


async def _app(
    running: Running, tmp_path: Path, replies: list[Reply], **approvals: Any
) -> tuple[App, ScriptedProvider]:
    folder = tmp_path / "personas"
    folder.mkdir(exist_ok=True)
    (folder / "default.md").write_text(PERSONA)
    provider = ScriptedProvider(replies)
    app = await running(
        provider,
        personas={"dirs": [str(folder)]},
        tools={"payment": PAYMENT},
        approvals=approvals,
    )
    return app, provider


def _orders(app: App) -> int:
    return int(db_rows(app, "select count(*) from orders")[0][0])


async def _asked(client: WsClient, text: str) -> dict[str, Any]:
    """Send `text`; the message.completed frame that asks for approval."""
    await client.send(type="message", text=text)
    asked = await client.until(
        lambda f: f["type"] == "message.completed" and bool(f.get("display")), WAIT_S
    )
    return asked


def _buttons(asked: dict[str, Any]) -> dict[str, dict[str, Any]]:
    (hint,) = asked["display"]
    assert hint["type"] == "confirm"
    return {b["action_id"]: b for b in hint["buttons"]}


async def _press(client: WsClient, asked: dict[str, Any], action_id: str) -> None:
    button = _buttons(asked)[action_id]
    await client.send(
        type="action",
        action_id=action_id,
        value=button["value"],
        label=button["label"],
        message_id=asked["message_id"],
    )


async def _final(client: WsClient, message_id: str, text: str) -> dict[str, Any]:
    return await client.until(
        lambda f: (
            f["type"] == "message.completed" and f["message_id"] == message_id and f["text"] == text
        ),
        WAIT_S,
    )


async def test_allowed_once_the_payment_runs_once_in_the_same_message(
    running: Running, session: ClientSession, tmp_path: Path
) -> None:
    app, provider = await _app(running, tmp_path, [Reply(calls=[PAY]), Reply("Order made.")])
    client = await connect(session, app)
    await client.hello()
    asked = await _asked(client, "I want to pay")
    # the call as a person reads it, with the three buttons; nothing ran yet
    assert "payment order" in asked["text"] and "ASSESSMENT" in asked["text"]
    assert "Category: QMAS" in asked["text"]
    buttons = _buttons(asked)
    assert [b["label"] for b in buttons.values()] == ["Allow once", "Always allow", "Deny"]
    assert _orders(app) == 0 and len(provider.requests) == 1
    assert db_rows(app, "select status from turns") == [("waiting",)]

    await _press(client, asked, "approval.once")
    done = await _final(client, asked["message_id"], "Order made.")
    assert done["message_id"] == asked["message_id"]  # the same live message
    assert _orders(app) == 1
    (tool,) = [m for m in provider.requests[1].messages if m.role == "tool"]
    assert "Order created" in tool.content

    # the same press again (a replayed button) changes nothing
    await _press(client, asked, "approval.once")
    await app.gateway.wait_idle()
    assert _orders(app) == 1 and len(provider.requests) == 2
    ((status, decided_by),) = db_rows(app, "select status, decided_by from approvals")
    assert status == "used" and decided_by == "websocket:v:visitor-0001"
    ((result, ok, extra),) = db_rows(
        app, "select result, ok, extra from audit_logs where call_id like '%:approval'"
    )
    assert "once by websocket:v:visitor-0001" in result and ok == 1
    assert json.loads(extra)["approval"]["decision"] == "once"
    assert db_rows(app, "select status from turns") == [("completed",)]


async def test_denied_no_payment_and_the_model_says_so(
    running: Running, session: ClientSession, tmp_path: Path
) -> None:
    app, provider = await _app(
        running, tmp_path, [Reply(calls=[PAY]), Reply("OK, I did not create the order.")]
    )
    client = await connect(session, app)
    await client.hello()
    asked = await _asked(client, "I want to pay")
    await _press(client, asked, "approval.deny")
    await _final(client, asked["message_id"], "OK, I did not create the order.")
    assert _orders(app) == 0
    (tool,) = [m for m in provider.requests[1].messages if m.role == "tool"]
    assert tool.content.startswith("not run:") and "denied" in tool.content
    assert db_rows(app, "select status from approvals") == [("denied",)]
    ((ok,),) = db_rows(app, "select ok from audit_logs where call_id like '%:approval'")
    assert ok == 0


async def test_expired_no_payment(running: Running, session: ClientSession, tmp_path: Path) -> None:
    app, provider = await _app(
        running, tmp_path, [Reply(calls=[PAY]), Reply("Nobody approved it in time.")], timeout_s=0.5
    )
    client = await connect(session, app)
    await client.hello()
    asked = await _asked(client, "I want to pay")
    await _final(client, asked["message_id"], "Nobody approved it in time.")
    assert _orders(app) == 0
    (tool,) = [m for m in provider.requests[1].messages if m.role == "tool"]
    assert "nobody approved" in tool.content
    assert db_rows(app, "select status, decided_by from approvals") == [("expired", "timeout")]
    # a press after the expiry does nothing
    await _press(client, asked, "approval.once")
    await app.gateway.wait_idle()
    assert _orders(app) == 0 and len(provider.requests) == 2


async def test_always_allow_covers_the_next_call_on_the_same_target_only(
    running: Running, session: ClientSession, tmp_path: Path
) -> None:
    other = ("create_payment", {"service": "OTHER", "category": "QMAS", "method": "CARD"})
    replies = [Reply(calls=[PAY]), Reply("One."), Reply(calls=[PAY]), Reply("Two.")]
    replies += [Reply(calls=[other]), Reply("Asked.")]
    app, _ = await _app(running, tmp_path, replies)
    client = await connect(session, app)
    await client.hello()
    asked = await _asked(client, "pay")
    await _press(client, asked, "approval.always")
    await _final(client, asked["message_id"], "One.")
    second = await client.ask("pay again")
    assert second["text"] == "Two."  # not asked again: its display is the order's card only
    assert [hint["type"] for hint in second["display"]] == ["card"]
    assert _orders(app) == 2
    third = await _asked(client, "pay for something else")  # another target: asked
    assert "OTHER" in third["text"]


async def test_text_reply_answers_and_a_new_message_withdraws(
    running: Running, session: ClientSession, tmp_path: Path
) -> None:
    replies = [Reply(calls=[PAY]), Reply("Done by text."), Reply(calls=[PAY])]
    replies += [Reply("Not done."), Reply("Hello again.")]
    app, _ = await _app(running, tmp_path, replies)
    client = await connect(session, app)
    await client.hello()
    asked = await _asked(client, "pay")
    await client.send(type="message", text="allow")
    await _final(client, asked["message_id"], "Done by text.")
    assert _orders(app) == 1
    again = await _asked(client, "pay once more")
    await client.send(type="message", text="what is the weather?")  # the user moves on
    await _final(client, again["message_id"], "Not done.")
    await client.until(
        lambda f: f["type"] == "message.completed" and f["text"] == "Hello again.", WAIT_S
    )
    assert _orders(app) == 1
    statuses = [row[0] for row in db_rows(app, "select status from approvals order by created_at")]
    assert statuses == ["used", "dismissed"]


async def test_only_named_approvers_may_answer(
    running: Running, session: ClientSession, tmp_path: Path
) -> None:
    app, _ = await _app(
        running, tmp_path, [Reply(calls=[PAY]), Reply("Made.")], approvers=["slack:U0BOSS"]
    )
    client = await connect(session, app)
    await client.hello()
    await client.send(type="message", text="pay")
    waiting = await client.until(lambda f: f["type"] == "message.completed", WAIT_S)
    assert "Waiting for an approver" in waiting["text"] and not waiting.get("display")
    await client.send(type="message", text="allow")  # the user is no approver
    refused = await client.until(
        lambda f: f["type"] == "message.completed" and "Only an approver" in f["text"], WAIT_S
    )
    assert refused
    await asyncio.sleep(0)  # nothing else may have happened
    assert _orders(app) == 0
    assert db_rows(app, "select status from approvals") == [("pending",)]


@pytest.mark.parametrize("exempt", [True])
async def test_exempt_runs_unasked(
    running: Running, session: ClientSession, tmp_path: Path, exempt: bool
) -> None:
    app, _ = await _app(
        running, tmp_path, [Reply(calls=[PAY]), Reply("Made.")], exempt=["create_payment"]
    )
    client = await connect(session, app)
    await client.hello()
    assert (await client.ask("pay"))["text"] == "Made."
    assert _orders(app) == 1


async def test_two_processes_two_questions_in_one_turn_answered_on_the_other_process(
    prefix: str, running: Running, session: ClientSession, tmp_path: Path
) -> None:
    """Redis mode: the turn runs on one process, each press arrives on the other; the turn
    goes on (twice: each question queues its own resumption) in the same live message."""
    other = ("create_payment", {"service": "OTHER", "category": "QMAS", "method": "CARD"})
    folder = tmp_path / "personas"
    folder.mkdir()
    (folder / "default.md").write_text(PERSONA)
    shared = ScriptedProvider([Reply(calls=[PAY]), Reply(calls=[other]), Reply("Both made.")])
    sections: dict[str, Any] = {
        "redis": {"url": URL, "prefix": prefix, "lease_s": 4},
        "personas": {"dirs": [str(folder)]},
        "tools": {
            "payment": {
                "currency": "CNY",
                "prices": {"ASSESSMENT": {"QMAS": 9}, "OTHER": {"QMAS": 8}},
            }
        },
    }
    first = await running(shared, **sections)
    second = await running(shared, **sections)
    here, there = await connect(session, first), await connect(session, second)
    await here.hello()
    await there.hello()  # the same visitor: the same conversation, on the other process
    asked = await _asked(here, "pay for both")
    await _press(there, asked, "approval.once")
    again = await there.until(
        lambda f: (
            f["type"] == "message.completed"
            and f["message_id"] == asked["message_id"]
            and "OTHER" in f["text"]
        ),
        WAIT_S,
    )
    await _press(there, again, "approval.once")
    await _final(there, asked["message_id"], "Both made.")
    await eventually(lambda: _orders(first) == 2, WAIT_S)
    created = [f for f in here.frames if f["type"] == "message.created"]
    assert len(created) == 1  # one live message for the whole turn
    assert [r[0] for r in db_rows(first, "select status from approvals")] == ["used", "used"]


async def test_the_sessions_api_shows_the_buttons_and_takes_the_press(
    tmp_path: Path, session: ClientSession
) -> None:
    folder = tmp_path / "personas"
    folder.mkdir()
    (folder / "default.md").write_text(PERSONA)
    provider = ScriptedProvider([Reply(calls=[PAY]), Reply("Order made.")])
    config = make_config(
        tmp_path,
        channels=api_section(),
        personas={"dirs": [str(folder)]},
        tools={"payment": PAYMENT},
    )
    async with App(config, base_dir=tmp_path, provider=provider) as app:
        api = ApiClient(session, app)
        sid = await api.new_session(user_id="user-42")
        asked = (await api.ask(sid, "I want to pay")).last("message.completed")
        button = _buttons(asked)["approval.once"]
        press = {"action_id": "approval.once", "value": button["value"]}
        pressed = await api.stream("POST", f"/sessions/{sid}/actions", press | {"label": "Allow"})
        done = pressed.last("message.completed")
        assert (done["message_id"], done["text"]) == (asked["message_id"], "Order made.")
        assert _orders(app) == 1


ADMIN = "admin-test-token-approvals-1"


async def test_the_admin_view_lists_requests_and_answers_them(
    running: Running, session: ClientSession, tmp_path: Path
) -> None:
    folder = tmp_path / "personas"
    folder.mkdir()
    (folder / "default.md").write_text(PERSONA)
    provider = ScriptedProvider([Reply(calls=[PAY]), Reply("Made by the admin's yes.")])
    app = await running(
        provider,
        personas={"dirs": [str(folder)]},
        tools={"payment": PAYMENT},
        admin={"token": ADMIN},
        approvals={"approvers": ["slack:U0BOSS"]},  # the user is none: the admin answers
    )
    client = await connect(session, app)
    await client.hello()
    await client.send(type="message", text="pay")
    waiting = await client.until(lambda f: f["type"] == "message.completed", WAIT_S)
    bearer = {"Authorization": f"Bearer {ADMIN}"}
    async with session.get(f"{app.url}/admin/approvals", headers=bearer) as response:
        assert response.status == 200
        page = await response.text()
    ((approval_id,),) = db_rows(app, "select id from approvals")
    assert approval_id in page and "create_payment" in page and "ASSESSMENT" in page
    (csrf,) = re.findall(r'name="csrf" value="([0-9a-f]+)"', page)
    url = f"{app.url}/admin/approvals/{approval_id}"
    # a post without the page's token (another site's form) is refused, nothing decided
    async with session.post(url, data={"decision": "once"}, headers=bearer) as response:
        assert response.status == 403
    assert db_rows(app, "select status from approvals") == [("pending",)]
    async with session.post(url, data={"decision": "once", "csrf": csrf}, headers=bearer) as r:
        assert r.status == 200 and "once" in await r.text()
    await _final(client, waiting["message_id"], "Made by the admin's yes.")
    assert _orders(app) == 1
    assert db_rows(app, "select status, decided_by from approvals") == [("used", "admin")]
    async with session.post(url, data={"decision": "deny", "csrf": csrf}, headers=bearer) as r:
        assert "answered already" in await r.text()  # used once
    assert _orders(app) == 1


async def test_a_place_on_a_slack_instance_not_running_is_a_config_error(
    running: Running, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match="approvals.place: .*'ops'.* not enabled"):
        await running(approvals={"place": "slack:ops/C0OPS"})
