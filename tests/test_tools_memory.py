"""Memories, the intake form and payment orders, stored in SQLite and scoped to the caller."""

from __future__ import annotations

import base64
import json
import sqlite3
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.storage import SqliteStore
from content.parts import ImagePart
from tests.blob_kit import MemoryBlobs as MemoryBlobStore
from tests.tools_kit import call, call_json, context, settings
from tools.builtin.memory import intake_tool
from tools.registry import ToolRegistry
from tools.settings import IntakeSettings

PRICES = {
    "currency": "CNY",
    "prices": {"ASSESSMENT": {"QMAS": 99, "IANG": 79}},
    "methods": ["ALIPAY", "CARD"],
}
PAY_URL = "https://pay.example.com/checkout?order={order_id}&amount={amount}&currency={currency}"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    async with SqliteStore(tmp_path / "bot.db") as opened:
        yield opened


def rows(store: SqliteStore, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(store.path) as db:
        return db.execute(sql).fetchall()


async def test_memories_by_type_relevance_and_importance(store: SqliteStore) -> None:
    ctx = context(storage=store)
    for memory_type, content in [
        ("FACT", "Is 35 years old"),
        ("PREFERENCE", "Prefers answers in English"),
        ("INTENT", "Plans to move to Hong Kong in 2026"),
        ("FACT", "Works as a data engineer in banking"),
        ("FACT", "is 35 years  old"),  # the same fact again: updated, not doubled
    ]:
        saved = await call_json(
            "save_user_memory", {"memory_type": memory_type, "content": content}, ctx
        )
        assert saved["success"] is True
    assert sorted(rows(store, "select memory_type, importance from memories")) == [
        ("FACT", 70),
        ("FACT", 70),
        ("INTENT", 80),
        ("PREFERENCE", 60),
    ]
    data = await call_json("get_user_context", {"query": "which job in banking?"}, ctx)
    contents = [m["content"] for m in data["memories"]]
    assert contents[0] == "Works as a data engineer in banking"  # relevant first
    assert contents[1] == "Plans to move to Hong Kong in 2026"  # then by importance
    assert len(contents) == 4 and "is 35 years old" in contents
    bad = await call("save_user_memory", {"memory_type": "SECRET", "content": "x"}, ctx)
    assert not bad.ok and "Input should be 'FACT', 'PREFERENCE' or 'INTENT'" in bad.text


async def test_memories_persist_and_stay_with_their_user(tmp_path: Path) -> None:
    path = tmp_path / "bot.db"
    async with SqliteStore(path) as store:
        await call_json(
            "save_user_memory",
            {"memory_type": "FACT", "content": "Lives in Berlin"},
            context(storage=store),
        )
    async with SqliteStore(path) as store:  # a restart, a new session, another channel
        own = await call_json("get_user_context", {"query": "where"}, context(storage=store))
        other = await call_json(
            "get_user_context", {"query": "where"}, context(user="u2", storage=store)
        )
    assert [m["content"] for m in own["memories"]] == ["Lives in Berlin"]
    assert other == {"success": True, "memories": [], "message": "nothing known yet"}
    forged = await call("get_user_context", {"query": "where", "user_id": "u1"}, context(user="u2"))
    assert not forged.ok and "argument 'user_id': Extra inputs are not permitted" in forged.text
    nowhere = await call("get_user_context", {"query": "where"}, context())
    assert not nowhere.ok and "memory is not available" in nowhere.text


async def test_collect_info_records_facts_and_says_what_is_missing(store: SqliteStore) -> None:
    ctx = context(storage=store)
    first = await call_json(
        "collect_info", {"age": 35, "education": "Master", "category": "QMAS"}, ctx
    )
    assert first["collected"] == {"age": 35, "education": "Master"}
    assert first["missing"] == ["years_of_experience"]
    assert "Still missing: years_of_experience" in first["message"]
    second = await call_json("collect_info", {"years_of_experience": 10, "age": 36}, ctx)
    assert second["missing"] == [] and "All required information is in" in second["message"]
    assert sorted(rows(store, "select key, content, memory_type, importance from memories")) == [
        ("intake:age", "age: 36", "FACT", 80),  # replaced, not added
        ("intake:education", "education: Master", "FACT", 80),
        ("intake:years_of_experience", "years of experience: 10", "FACT", 80),
    ]
    wrong = await call("collect_info", {"age": "thirty", "salary": 5}, ctx)
    assert wrong.text.splitlines()[:2] == [
        "collect_info: argument 'age': Input should be a valid integer,"
        " unable to parse string as an integer",
        "collect_info: argument 'salary': Extra inputs are not permitted",
    ]


async def test_collect_info_schema_comes_from_config() -> None:
    fields = {
        "programme": {"description": "which programme"},
        "has_offer": {"type": "boolean", "required": False},
    }
    made = intake_tool(IntakeSettings.model_validate({"fields": fields}))
    props = made.spec.parameters["properties"]
    assert list(props) == ["programme", "has_offer", "category"]
    assert props["programme"]["description"] == "which programme (needed)"
    assert props["has_offer"]["anyOf"][0] == {"type": "boolean"}
    with pytest.raises(ValueError, match="must be a plain name"):
        intake_tool(IntakeSettings.model_validate({"fields": {"bad name": {}}}))
    registry = ToolRegistry([made])
    assert registry.names() == ["collect_info"]


async def test_create_payment_records_a_pending_order_with_a_qr_code(store: SqliteStore) -> None:
    config = settings(payment={**PRICES, "provider_url": PAY_URL})
    blobs = MemoryBlobStore()
    ctx = context(storage=store, config=config, blobs=blobs)
    result = await call(
        "create_payment", {"service": "assessment", "category": "qmas", "method": "alipay"}, ctx
    )
    assert result.ok, result.text
    data = json.loads(result.text)
    assert (data["amount"], data["currency"], data["method"], data["status"]) == (
        99,
        "CNY",
        "ALIPAY",
        "pending",
    )
    assert "payment has NOT been received" in data["message"]
    assert "paid" not in data["message"] and "success" not in data["message"]
    expires = datetime.fromisoformat(data["expires_at"])
    assert timedelta(minutes=29) < expires - datetime.now(expires.tzinfo) <= timedelta(minutes=30)
    assert (
        data["payment_url"]
        == f"https://pay.example.com/checkout?order={data['order_id']}&amount=99.00&currency=CNY"
    )
    assert "base64" not in result.text  # the image goes to the user, not to the model
    (card,) = result.display
    assert card["type"] == "card" and card["title"] == "Payment order"
    assert {"label": "Amount", "value": "99.00 CNY"} in card["fields"]
    png = base64.b64decode(card["image"].removeprefix("data:image/png;base64,"))
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    # the same code as an image part, kept in the blob store, for channels that send media
    (qr,) = result.parts
    assert isinstance(qr, ImagePart) and qr.blob.source == "tool:create_payment"
    assert (qr.blob.mime_type, qr.blob.name, qr.blob.size) == (
        "image/png",
        "payment-qr.png",
        len(png),
    )
    assert await blobs.get(qr.blob.blob_id) == ("image/png", png)
    order = await store.get_order(data["order_id"])
    assert order is not None and (order.user_id, order.status, order.amount) == (
        "u1",
        "pending",
        99.0,
    )
    assert rows(store, "select memory_type, importance, content from memories") == [
        (
            "INTENT",
            90,
            f"Wants to pay for ASSESSMENT (QMAS) by ALIPAY; order {data['order_id']} is pending",
        )
    ]
    # no blob store here: the card alone, as before
    without_store = await call(
        "create_payment",
        {"service": "assessment", "category": "qmas", "method": "alipay"},
        context(storage=store, config=config),
    )
    assert without_store.ok and without_store.parts == () and without_store.display[0]["image"]


async def test_create_payment_refuses_what_is_not_configured(store: SqliteStore) -> None:
    ctx = context(storage=store, config=settings(payment=PRICES))
    wrong_category = await call(
        "create_payment", {"service": "ASSESSMENT", "category": "CIES", "method": "CARD"}, ctx
    )
    assert (
        "unknown category for ASSESSMENT 'CIES'; choose one of ['QMAS', 'IANG']"
        in wrong_category.text
    )
    wrong_method = await call(
        "create_payment", {"service": "ASSESSMENT", "category": "IANG", "method": "cash"}, ctx
    )
    assert "unknown payment method 'cash'; choose one of ['ALIPAY', 'CARD']" in wrong_method.text
    no_prices = await call(
        "create_payment", {"service": "A", "category": "B", "method": "C"}, context(storage=store)
    )
    assert not no_prices.ok and "no paid services are configured" in no_prices.text
    assert rows(store, "select count(*) from orders") == [(0,)]
    offline = await call(
        "create_payment", {"service": "ASSESSMENT", "category": "IANG", "method": "CARD"}, ctx
    )
    data = json.loads(offline.text)
    assert data["payment_url"] is None and "no link or QR code" in data["message"]
    assert "image" not in offline.display[0] and data["amount"] == 79
    assert offline.parts == ()
