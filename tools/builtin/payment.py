"""The `create_payment` tool: a pending order at the configured price, with a QR code to pay it.

Nothing here takes or confirms a payment: the order stays pending until the payment provider
(outside this process) settles it, and the text the model reads says so.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import secrets
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from tools.base import ToolContext, ToolError, ToolResult
from tools.display import card
from tools.memory import OrderStore, remember
from tools.registry import tool
from tools.settings import PaymentSettings

INTENT_IMPORTANCE = 90


def _pick(value: str, choices: Iterable[str], what: str) -> str:
    options = list(choices)
    for choice in options:
        if choice.upper() == value.strip().upper():
            return choice
    raise ToolError(f"unknown {what} {value!r}; choose one of {options}")


def qr_png(text: str) -> bytes:
    """A PNG QR code of `text`."""
    import segno  # here: only a payment link needs it, and every start would import it

    buffer = io.BytesIO()
    segno.make(text, error="m").save(buffer, kind="png", scale=5, border=2)
    return buffer.getvalue()


def data_url(png: bytes) -> str:
    """A PNG as a data: URL, which a client can show without fetching anything."""
    return "data:image/png;base64," + base64.b64encode(png).decode()


def _order_id(now: datetime) -> str:
    return f"ORD-{now:%Y%m%d}-{secrets.token_hex(3).upper()}"


def _payment_url(config: PaymentSettings, order: dict[str, object]) -> str | None:
    if not config.provider_url:
        return None
    return config.provider_url.format(**{k: str(v) for k, v in order.items()})


@tool(destructive=False, open_world=False, approval=True)
async def create_payment(ctx: ToolContext, service: str, category: str, method: str) -> ToolResult:
    """Create a payment order for a paid service and show the user a QR code to pay it.

    The order is pending until the payment provider confirms it: never tell the user they
    have paid. Use it only after the user has asked to pay.

    Args:
        service: the paid service, as listed in the price table (e.g. ASSESSMENT).
        category: what the service is for (e.g. a programme code); it sets the price.
        method: how the user wants to pay (e.g. CARD).
    """
    config = ctx.deps.settings.payment
    if not config.prices:
        raise ToolError("no paid services are configured here (tools.payment.prices); say so")
    store = ctx.storage
    if not isinstance(store, OrderStore):
        raise ToolError("orders cannot be recorded in this deployment (no storage is attached)")
    service = _pick(service, config.prices, "service")
    category = _pick(category, config.prices[service], f"category for {service}")
    method = _pick(method, config.methods, "payment method")
    now = datetime.now(UTC)
    expires = now + timedelta(minutes=config.expiry_minutes)
    amount = config.prices[service][category]
    order: dict[str, object] = {
        "order_id": _order_id(now),
        "amount": f"{amount:.2f}",
        "currency": config.currency,
        "method": method,
        "service": service,
        "category": category,
    }
    url = _payment_url(config, order)
    await store.create_order(
        {
            "id": order["order_id"],
            "tenant": ctx.tenant or "",
            "user_id": ctx.user_id,
            "session_id": ctx.session_id,
            "service": service,
            "category": category,
            "method": method,
            "amount": amount,
            "currency": config.currency,
            "status": "pending",
            "payment_url": url,
            "expires_at": expires.isoformat(),
        }
    )
    await remember(
        ctx,
        "INTENT",
        f"Wants to pay for {service} ({category}) by {method}; "
        f"order {order['order_id']} is pending",
        category=category,
        importance=INTENT_IMPORTANCE,
    )
    price = f"{order['amount']} {config.currency}"
    if url:
        how = (
            f"Give the user the payment link {url} to pay {price} before {expires:%H:%M} UTC "
            f"({config.expiry_minutes} minutes); chats that can show it also get a QR code card."
        )
    else:
        how = (
            "Online payment is not set up in this deployment, so there is no link or QR code: "
            "give the user the order number and say that payment cannot be made in this chat."
        )
    summary = {
        "success": True,
        "order_id": order["order_id"],
        "status": "pending",
        "amount": amount,
        "currency": config.currency,
        "method": method,
        "expires_at": expires.isoformat(timespec="seconds"),
        "payment_url": url,
        "message": f"Order created; payment has NOT been received. {how}",
    }
    png = await asyncio.to_thread(qr_png, url) if url else None
    # the QR code as an image part too, for channels that send media (the card stays as it was)
    qr = await ctx.keep_blob(png, mime_type="image/png", name="payment-qr.png") if png else None
    hint = card(
        "Payment order",
        {
            "Order": order["order_id"],
            "Service": f"{service} · {category}",
            "Amount": price,
            "Method": method,
            "Pay before": f"{expires:%Y-%m-%d %H:%M} UTC",
            "Status": "waiting for payment",
        },
        subtitle="Scan the code to pay" if url else "Online payment is not available here",
        image=data_url(png) if png else None,
    )
    parts = (qr,) if qr is not None else ()
    return ToolResult(json.dumps(summary, ensure_ascii=False), display=(hint,), parts=parts)
