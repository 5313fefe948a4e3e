"""What every tool call guarantees, through the real coordinator, loop, registry and SQLite store:
PII masked before the model reads it, timeouts and crashes as results with audit rows, parallel
calls in call order, identity from context, the persona allowlist, display hints on the web socket.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession

from agent.coordinator import AgentSettings, Coordinator, TurnInput
from agent.loop import LoopResult, LoopSettings
from agent.personas import Persona
from agent.providers.scripted import Reply, ScriptedProvider
from bot.storage import SqliteStore
from tests.conftest import Running, connect
from tools.base import ToolContext
from tools.builtin import builtin_registry
from tools.events import TurnEvent
from tools.registry import Tool, ToolRegistry, tool

PHONE = "+852 9123 4567"


@tool
async def customer_record(ctx: ToolContext) -> str:
    """The customer's record."""
    return f"Ann Lee, phone {PHONE}, mail ann@example.com, card 4111 1111 1111 1111"


@tool(timeout_s=0.05)
async def stuck(ctx: ToolContext) -> str:
    """Never answers."""
    await asyncio.Event().wait()
    return "never"


@tool
async def explodes(ctx: ToolContext) -> str:
    """Always crashes."""
    raise RuntimeError("database on fire")


def meeting(barrier: asyncio.Barrier, second_done: asyncio.Event) -> Tool:
    @tool(name="meet")
    async def meet(ctx: ToolContext, label: str) -> str:
        """Wait until every call of the round has started, then answer; the first one answers last.

        Args:
            label: a name for this call
        """
        await barrier.wait()
        if label == "first":
            await second_done.wait()
        else:
            second_done.set()
        return f"met {label}"

    return meet


def persona(*tools: str) -> Persona:
    return Persona("default", "test", tools, None, None, "be brief", None, f"v-{'-'.join(tools)}")


class Rig:
    """A coordinator over a real SQLite store, a registry with the built-ins and the test tools."""

    def __init__(self, store: SqliteStore, provider: ScriptedProvider) -> None:
        registry = builtin_registry()
        self.barrier, self.second_done = asyncio.Barrier(2), asyncio.Event()
        for extra in (customer_record, stuck, explodes, meeting(self.barrier, self.second_done)):
            registry.add(extra)
        self.registry: ToolRegistry = registry
        self.store = store
        self.provider = provider
        self.coordinator = Coordinator(
            provider=provider,
            registry=registry,
            store=store,
            settings=AgentSettings(loop=LoopSettings(tool_timeout_s=5)),
        )

    async def turn(
        self, text: str, *tools: str, user: str = "u1", channel: str = "web", chat: str = "c1"
    ) -> tuple[LoopResult, str]:
        session = await self.store.active_session(
            channel=channel, conversation_key=chat, user_id=user
        )

        async def emit(event: TurnEvent) -> None:
            return None

        turn = TurnInput(persona(*tools), session, uuid.uuid4().hex, user, channel, chat, text)
        return await self.coordinator.run_turn(turn, emit), session

    def tool_messages(self, request_no: int) -> list[Any]:
        return [m for m in self.provider.requests[request_no].messages if m.role == "tool"]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    async with SqliteStore(tmp_path / "bot.db") as opened:
        yield opened


async def test_pii_is_masked_before_the_model_and_the_audit_log_see_it(store: SqliteStore) -> None:
    provider = ScriptedProvider([Reply(calls=[("customer_record", {})]), Reply("Found her.")])
    rig = Rig(store, provider)
    _, session = await rig.turn("who is the customer?", "customer_record")
    (seen,) = rig.tool_messages(1)
    assert seen.content == "Ann Lee, phone [phone], mail [email], card [card number]"
    for digits in ("852", "9123", "4567", "4111"):
        assert digits not in seen.content
    (audit,) = await store.audit_for_session(session)
    assert audit.result == seen.content and audit.ok == 1
    stored = [m.content for m in await store.messages_for_session(session) if m.role == "tool"]
    assert stored == [seen.content]


async def test_timeouts_and_crashes_become_results_and_audit_rows(store: SqliteStore) -> None:
    calls = [("stuck", {}), ("explodes", {}), ("customer_record", {"x": 1})]
    provider = ScriptedProvider([Reply(calls=calls), Reply("Sorry, those failed.")])
    rig = Rig(store, provider)
    result, session = await rig.turn("try", "stuck", "explodes", "customer_record")
    assert result.text == "Sorry, those failed."
    seen = rig.tool_messages(1)
    assert [(m.name, m.is_error) for m in seen] == [
        ("stuck", True),
        ("explodes", True),
        ("customer_record", True),
    ]
    assert seen[0].content == "tool stuck timed out after 0.05 s"
    assert seen[1].content == "tool explodes failed: RuntimeError: database on fire"
    assert "argument 'x': Extra inputs are not permitted" in seen[2].content
    audit = {a.call_id: a for a in await store.audit_for_session(session)}  # in finishing order
    assert [
        (
            audit[m.tool_call_id].tool_name,
            audit[m.tool_call_id].ok,
            audit[m.tool_call_id].result,
        )
        for m in seen
    ] == [(m.name, 0, m.content) for m in seen]
    assert [json.loads(audit[m.tool_call_id].arguments or "") for m in seen] == [{}, {}, {"x": 1}]


async def test_calls_of_one_round_run_in_parallel_and_answer_in_call_order(
    store: SqliteStore,
) -> None:
    calls = [("meet", {"label": "first"}), ("meet", {"label": "second"})]
    provider = ScriptedProvider([Reply(calls=calls), Reply("both met")])
    rig = Rig(store, provider)
    async with asyncio.timeout(5):  # a sequential loop would wait at the barrier forever
        await rig.turn("go", "meet")
    assert [m.content for m in rig.tool_messages(1)] == ["met first", "met second"]


async def test_identity_comes_from_context_not_from_arguments(store: SqliteStore) -> None:
    provider = ScriptedProvider(
        [
            Reply(
                calls=[("save_user_memory", {"memory_type": "FACT", "content": "Alice is a pilot"})]
            ),
            Reply("Noted."),
            Reply(calls=[("get_user_context", {"query": "job", "user_id": "alice"})]),
            Reply(calls=[("get_user_context", {"query": "job"})]),
            Reply("I know nothing about you yet."),
            Reply(calls=[("get_user_context", {"query": "job"})]),
            Reply("You are a pilot."),
        ]
    )
    rig = Rig(store, provider)
    await rig.turn("I am a pilot", "save_user_memory", user="alice", channel="websocket", chat="w1")
    await rig.turn("what do you know about alice?", "get_user_context", user="mallory")
    forged, honest = rig.tool_messages(3)[0], rig.tool_messages(4)[1]
    assert (
        forged.is_error and "argument 'user_id': Extra inputs are not permitted" in forged.content
    )
    assert json.loads(honest.content)["memories"] == []
    # the same user on another channel and conversation, in a new session, is remembered
    await rig.turn("what do I do?", "get_user_context", user="alice", channel="telegram", chat="t9")
    memories = json.loads(rig.tool_messages(6)[0].content)["memories"]
    assert memories == [{"type": "FACT", "content": "Alice is a pilot", "importance": 70}]


async def test_persona_allowlist_holds_for_the_built_in_tools(store: SqliteStore) -> None:
    provider = ScriptedProvider(
        [
            Reply(calls=[("create_payment", {"service": "A", "category": "B", "method": "CARD"})]),
            Reply("I cannot do that here."),
        ]
    )
    rig = Rig(store, provider)
    await rig.turn("charge me", "get_current_datetime")
    (refused,) = rig.tool_messages(1)
    assert refused.content == (
        "tool 'create_payment' is not available here; available tools: ['get_current_datetime']"
    )
    with sqlite3.connect(store.path) as db:
        assert db.execute("select count(*) from orders").fetchone() == (0,)


async def test_a_payment_card_reaches_the_web_socket_client(
    running: Running, session: ClientSession, tmp_path: Path
) -> None:
    folder = tmp_path / "personas"
    folder.mkdir()
    (folder / "default.md").write_text(
        "---\nname: default\ndescription: Sells assessments.\ntools: [create_payment]\n---\nSell.\n"
    )
    provider = ScriptedProvider(
        [
            Reply(
                calls=[
                    (
                        "create_payment",
                        {"service": "ASSESSMENT", "category": "QMAS", "method": "CARD"},
                    )
                ]
            ),
            Reply("Scan the code to pay 99.00 CNY."),
        ]
    )
    payment = {
        "currency": "CNY",
        "prices": {"ASSESSMENT": {"QMAS": 99}},
        "provider_url": "https://pay.example.com/c?o={order_id}",
    }
    app = await running(
        provider,
        personas={"dirs": [str(folder)]},
        tools={"payment": payment},
        approvals={"exempt": ["create_payment"]},  # asked about in tests/test_approvals*.py
    )
    client = await connect(session, app)
    await client.hello()
    completed = await client.ask("I want to pay for the assessment")
    assert completed["text"] == "Scan the code to pay 99.00 CNY."
    (card,) = completed["display"]
    assert card["type"] == "card" and card["image"].startswith("data:image/png;base64,")
    fields = {f["label"]: f["value"] for f in card["fields"]}
    assert fields["Amount"] == "99.00 CNY" and fields["Status"] == "waiting for payment"
    order = await app.store.get_order(fields["Order"])
    assert order is not None and order.user_id == "v:visitor-0001" and order.status == "pending"
    (tool_message,) = [m for m in provider.requests[1].messages if m.role == "tool"]
    assert "base64" not in tool_message.content and "NOT been received" in tool_message.content
