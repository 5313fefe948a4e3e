"""PII masking: what is masked, what is left alone, configuration, and a tool's opt-out."""

from __future__ import annotations

import pytest

from tools.base import ToolContext
from tools.builtin.settings import PiiSettings
from tools.pii import DEFAULT_MASKER, PiiMasker, luhn_ok
from tools.registry import ToolRegistry, tool

mask = DEFAULT_MASKER.mask
PHONE = "+852 9123 4567"


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("Call +852 9123 4567 today", "Call [phone] today"),
        ("tel:+1 (415) 555-2671.", "tel:[phone]."),
        ("+8613800138000", "[phone]"),
        ("手机 138 0013 8000", "手机 [phone]"),
        ("office (415) 555-2671", "office [phone]"),
        ("mail ann.lee+bot@mail.example.co.uk now", "mail [email] now"),
        ("card 4111 1111 1111 1111", "card [card number]"),
        ("card 5500-0000-0000-0004!", "card [card number]!"),
        ("身份证 11010519491231002X", "身份证 [id number]"),
        ("HKID A123456(3)", "HKID [id number]"),
        ("SSN 078-05-1120", "SSN [id number]"),
        ("passport E12345678", "passport [passport number]"),
    ],
)
def test_personal_data_is_masked(text: str, masked: str) -> None:
    assert mask(text) == masked


@pytest.mark.parametrize(
    "text",
    [
        "4111 1111 1111 1112",  # fails the Luhn check: not a card
        "110105194912310021",  # wrong ID check digit
        "amount 3246900.00 HKD, rate 1.0823",
        "2024-01-23T06:30:00+08:00 and +05:30",
        "timestamp 1706012345678 and order ORD-20240123-AB12CD",
        "3 000 000 people, ISBN 978-3-16-148410-0",
        "years 2023-2024, version 1.2.3.4",
    ],
)
def test_ordinary_numbers_are_left_alone(text: str) -> None:
    assert mask(text) == text


def test_luhn() -> None:
    assert luhn_ok("79927398713") and not luhn_ok("79927398710")


def test_kinds_and_extra_patterns_from_settings() -> None:
    only_email = PiiSettings(kinds=["email"], extra_patterns={"member_id": r"M-\d{6}"}).masker()
    assert only_email is not None
    assert only_email.mask("a@b.io +852 9123 4567 M-123456") == "[email] +852 9123 4567 [member_id]"
    assert PiiSettings(enabled=False).masker() is None
    with pytest.raises(ValueError, match="PII pattern 'bad' is not a valid regex"):
        PiiSettings(extra_patterns={"bad": "(unclosed"})
    with pytest.raises(ValueError, match="unknown PII kinds"):
        PiiMasker.build(["ssn"])


@tool
async def contact(ctx: ToolContext) -> str:
    """Return a contact line."""
    return "Ann: +852 9123 4567, ann@example.com"


@tool(mask_pii=False)
async def raw_contact(ctx: ToolContext) -> str:
    """Return a contact line, unmasked on purpose."""
    return "Ann: +852 9123 4567"


async def test_registry_masks_unless_the_tool_opts_out() -> None:
    registry = ToolRegistry([contact, raw_contact])
    ctx = ToolContext(user_id="u1")
    kw = {"allowed": registry.names(), "timeout_s": 1}
    assert (await registry.call("contact", "{}", ctx, **kw)).text == "Ann: [phone], [email]"
    assert (await registry.call("raw_contact", "{}", ctx, **kw)).text == "Ann: +852 9123 4567"
    registry.pii = None
    assert (await registry.call("contact", "{}", ctx, **kw)).text.endswith("ann@example.com")
    budget = await ToolRegistry([contact]).call("contact", "{}", ctx, max_result_chars=11, **kw)
    assert budget.text == "Ann: [phone\n…[truncated 10 characters]"  # masked first, then cut


@tool
async def big_page(ctx: ToolContext) -> str:
    """Return a long page with a phone number near the end."""
    return "lorem ipsum 2024 " * 2000 + f"call {PHONE}"


async def test_a_huge_result_is_masked_whole_then_cut() -> None:
    registry = ToolRegistry([big_page])
    ctx = ToolContext(user_id="u1")
    kw = {"allowed": registry.names(), "timeout_s": 1}
    whole = await registry.call("big_page", "{}", ctx, max_result_chars=10**6, **kw)
    assert whole.text.endswith("call [phone]") and len(whole.text) > 16384
    cut = await registry.call("big_page", "{}", ctx, max_result_chars=100, **kw)
    assert cut.text.startswith("lorem ipsum 2024 ") and "[truncated " in cut.text
