"""The offline demo model shows, with the consulting example and no API key, each thing it can do:
a knowledge search, a payment card with its link (once the user allowed the payment), a
specialist dispatched. Users see the
specialist's display name and never the dispatch prompt or the internal name."""

from __future__ import annotations

from pathlib import Path

from aiohttp import ClientSession

from agent.providers.offline import OfflineProvider
from tests.conftest import Running, connect

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "consulting"


async def test_the_offline_model_demos_the_consulting_example(
    running: Running, session: ClientSession
) -> None:
    app = await running(
        OfflineProvider(word_delay_s=0),
        personas={"dirs": [str(EXAMPLE / "personas")]},
        knowledge={"dirs": [str(EXAMPLE / "knowledge")]},
        tools={
            "payment": {
                "currency": "USD",
                "prices": {"ASSESSMENT": {"TALENT": 99, "GRADUATE": 79}},
                "methods": ["CARD", "PAYPAL"],
                "provider_url": "https://pay.avalon.example/checkout?order={order_id}",
            }
        },
    )
    client = await connect(session, app)
    await client.hello()
    hello = await client.ask("hello")
    assert "@fees-desk" in hello["text"] and "a knowledge search" in hello["text"]
    assert "specialist-" not in hello["text"]  # the hint names the display name

    found = await client.ask("How many points does the Talent Visa need?")
    assert found["text"].startswith("From the knowledge base, ")
    assert "**Talent Visa eligibility · Points test**" in found["text"]
    assert "Applicants need 80 points" in found["text"]

    paid = await client.ask("I want to pay for the GRADUATE assessment by PAYPAL")
    # create_payment waits for the user's yes (approvals): the demo model's first try and each
    # retry with an argument the tool's error named are asked about, and allowed, in turn
    for _ in range(6):
        hints = paid.get("display") or []
        if not hints or hints[0]["type"] != "confirm":
            break
        assert "`create_payment`" in paid["text"]
        once = next(b for b in hints[0]["buttons"] if b["action_id"] == "approval.once")
        await client.send(
            type="action",
            action_id="approval.once",
            value=once["value"],
            label=once["label"],
            message_id=paid["message_id"],
        )
        paid = await client.until(
            lambda f: f["type"] == "message.completed" and bool(f.get("display")), 30
        )
    (card,) = paid["display"]
    assert card["type"] == "card" and card["title"] == "Payment order"
    fields = {field["label"]: field["value"] for field in card["fields"]}
    assert fields["Service"] == "ASSESSMENT · GRADUATE" and fields["Method"] == "PAYPAL"
    assert "https://pay.avalon.example/checkout?order=" in paid["text"]

    asked = await client.ask("@costs what is the Talent fee in EUR?")
    started = next(f for f in client.frames if f["type"] == "agent.started")
    assert started["display_name"] == "Fees desk"
    assert started["description"] == "Working out the fees"  # the persona's display_description
    assert asked["text"].startswith("**Fees desk** reports:")
    shown = [
        str(frame.get("text", "")) + str(frame.get("description", ""))
        for frame in client.frames
        if frame["type"].startswith(("message.", "agent."))
    ]
    assert not [text for text in shown if "specialist-costs" in text]
    assert not [text for text in shown if "A user asked the coordinator" in text]
