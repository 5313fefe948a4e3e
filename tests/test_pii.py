"""PII masking: what is masked, what is left alone, configuration, and a tool's opt-out."""

from __future__ import annotations

from typing import Any

import pytest

from tools.base import ToolContext
from tools.pii import DEFAULT_MASKER, PiiMasker
from tools.registry import ToolRegistry, tool
from tools.settings import PiiSettings

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
        ("Passport No.: G1234567", "Passport No.: [passport number]"),
        ("护照号码：E12345678", "护照号码：[passport number]"),
        ("護照 K12345678", "護照 [passport number]"),
        ("SSN: 078-05-1120", "SSN: [id number]"),
        ("social security number 078-05-1120", "social security number [id number]"),
        ("手机13800138000", "手机[phone]"),
        ("London 020 7946 0958.", "London [phone]."),
        ("Berlin 030 12345678", "Berlin [phone]"),
        ("tel:(020) 7946 0958", "tel:[phone]"),
        ("Manchester 0161 496 0000", "Manchester [phone]"),
        ("mobile 0412 345 678", "mobile [phone]"),
        ("Tokyo 03-1234-5678.", "Tokyo [phone]."),
        ("Melbourne (03) 9123 4567", "Melbourne [phone]"),
        ("London +44 20 7946 0958", "London [phone]"),
        ("Tokyo +81 3-1234-5678, Osaka 06-6123-4567", "Tokyo [phone], Osaka [phone]"),
        ("call 415-555-2671x12", "call [phone]x12"),
        ("call 415-555-2671 ext. 12", "call [phone] ext. 12"),
        ("手机13800138000号", "手机[phone]号"),
    ],
)
def test_personal_data_is_masked(text: str, masked: str) -> None:
    assert mask(text) == masked


@pytest.mark.parametrize(
    "text",
    [
        "4111 1111 1111 1112",  # fails the Luhn check: not a card
        "110105194912310021",  # wrong ID check digit
        "110105194913310023",  # right check digit, but born in month 13
        "+852 1234 5678 and +44 20 1234",  # no such numbers in Hong Kong or London
        "amount 3246900.00 HKD, rate 1.0823",
        "2024-01-23T06:30:00+08:00 and +05:30",
        "timestamp 1706012345678 and order ORD-20240123-AB12CD",
        "3 000 000 people, ISBN 978-3-16-148410-0",
        "years 2023-2024, version 1.2.3.4",
        "PO12345678, AB1234567 and SKU X12345678",  # no passport keyword
        "part no 100-20-3000",  # the shape of a US social security number, no keyword
        "+12.345.678 EUR and +1234.5678",  # amounts
        "ORD15012345678",  # an order number that ends like a mainland mobile
        "opening hours 0900 1200 1500, rate 0.123 4567 8901",
        "05 1000 2000 and 2023-2024 010 2000 and 01/02/2024 030 1234",
        "ids 012 345 678 901, ISBN 0-306-40615-2",
        '{"task_id": "14837349186e"} and request 4155552671ab',  # hex ids that start like phones
    ],
)
def test_ordinary_numbers_are_left_alone(text: str) -> None:
    assert mask(text) == text


def test_a_phone_region_masks_its_national_numbers_written_bare() -> None:
    assert mask("tel 0312345678") == "tel 0312345678"  # ten bare digits: an order number too
    japan = PiiMasker.build(phone_region="JP")
    assert japan.mask("tel 0312345678, order 5678123412") == "tel [phone], order 5678123412"
    with pytest.raises(ValueError, match="unknown phone region 'XX'"):
        PiiMasker.build(phone_region="XX")


def test_kinds_and_extra_patterns_from_settings() -> None:
    only_email = PiiSettings(kinds=["email"], extra_patterns={"member_id": r"M-\d{6}"}).masker()
    assert only_email is not None
    assert only_email.mask("a@b.io +852 9123 4567 M-123456") == "[email] +852 9123 4567 [member_id]"
    assert PiiSettings(enabled=False).masker() is None
    keyed = PiiSettings(kinds=[], extra_patterns={"member": r"member (?P<pii>\d{4})"}).masker()
    assert keyed is not None and keyed.mask("member 1234, 5678") == "member [member], 5678"
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
    kw: dict[str, Any] = {"allowed": registry.names(), "timeout_s": 1}
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
    kw: dict[str, Any] = {"allowed": registry.names(), "timeout_s": 1}
    whole = await registry.call("big_page", "{}", ctx, max_result_chars=10**6, **kw)
    assert whole.text.endswith("call [phone]") and len(whole.text) > 16384
    cut = await registry.call("big_page", "{}", ctx, max_result_chars=100, **kw)
    assert cut.text.startswith("lorem ipsum 2024 ") and "[truncated " in cut.text
