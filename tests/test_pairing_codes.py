"""Pairing codes: 8 characters a person reads and types without mistaking one for another."""

from __future__ import annotations

from bot.pipeline.pairing_codes import ALPHABET, CODE_LENGTH, new_code, normalize


def test_codes_have_no_look_alikes_and_do_not_repeat() -> None:
    assert not set("0O1IL") & set(ALPHABET) and len(set(ALPHABET)) == len(ALPHABET) == 31
    codes = {new_code() for _ in range(2000)}
    assert len(codes) == 2000  # 31^8 ≈ 8.5·10^11: a repeat here would be a broken generator
    assert all(len(c) == CODE_LENGTH and set(c) <= set(ALPHABET) for c in codes)


def test_an_admin_may_type_a_code_in_any_case_with_dashes_or_spaces() -> None:
    assert normalize(" abcd-2345 ") == normalize("ABCD 2345") == "ABCD2345"
