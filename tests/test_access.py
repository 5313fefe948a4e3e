"""The access policy every channel shares: allowlists per channel, group_reply per channel."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.access import AccessConfig
from adapters.base import ChatRef, InboundMessage
from bot.pipeline.access import AccessRules
from bot.runtime.config import ConfigError
from tests.conftest import make_config


def msg(
    channel: str, user: str, chat: str, *, group: bool = False, mentioned: bool = False
) -> InboundMessage:
    return InboundMessage(
        ChatRef(channel, chat), user, "hi", "e", is_group=group, mentioned=mentioned
    )


RULES = AccessRules.of(
    allowed_users=[],
    group_reply="mention",
    sections={
        "websocket": AccessConfig(allowed_users=["v1"]),
        "telegram": AccessConfig(allowed_chats=["-100"], group_reply="all"),
        "open": AccessConfig(),
    },
)


def test_each_channel_has_its_own_allowlist() -> None:
    assert RULES.check(msg("websocket", "v1", "v1")) == "allow"
    assert RULES.check(msg("websocket", "v2", "v2")) == "refuse"
    assert RULES.check(msg("telegram", "anyone", "-100", group=True)) == "allow"
    assert RULES.check(msg("telegram", "anyone", "-200", group=True)) == "refuse"
    assert RULES.check(msg("open", "anyone", "c")) == "allow"


def test_group_reply_is_per_channel_over_the_gateways() -> None:
    # telegram says "all": unaddressed group messages count; elsewhere the gateway's "mention"
    assert RULES.check(msg("telegram", "u", "-100", group=True, mentioned=False)) == "allow"
    assert RULES.check(msg("open", "u", "g", group=True, mentioned=False)) == "ignore"
    assert RULES.check(msg("open", "u", "g", group=True, mentioned=True)) == "allow"


def test_unaddressed_chatter_is_ignored_before_it_is_refused() -> None:
    strict = AccessRules.of(allowed_users=["boss"], group_reply="mention", sections={})
    assert strict.check(msg("x", "stranger", "g", group=True)) == "ignore"
    assert strict.check(msg("x", "stranger", "g", group=True, mentioned=True)) == "refuse"
    assert strict.check(msg("x", "boss", "dm")) == "allow"


def test_dm_policy_decides_direct_messages_from_users_no_list_names() -> None:
    rules = AccessRules.of(
        allowed_users=["boss"],
        group_reply="all",
        sections={
            "paired": AccessConfig(dm_policy="pairing", allowed_users=["friend"]),
            "open": AccessConfig(dm_policy="open", allowed_chats=["-1"]),
            "listed": AccessConfig(allowed_users=["friend"]),
        },
    )
    assert rules.check(msg("paired", "stranger", "dm")) == "pair"
    assert rules.check(msg("paired", "friend", "dm")) == "allow"
    assert rules.check(msg("paired", "boss", "dm")) == "allow"  # gateway.allowed_users
    assert rules.check(msg("paired", "stranger", "g", group=True)) == "refuse"  # groups: lists
    assert rules.check(msg("open", "stranger", "dm")) == "allow"
    assert rules.check(msg("open", "stranger", "g", group=True)) == "refuse"
    assert rules.check(msg("listed", "stranger", "dm")) == "refuse"  # allowlist: as before
    # pairing with no lists at all: every stranger pairs (empty lists do not mean everyone)
    bare = AccessRules.of(
        allowed_users=[], group_reply="mention", sections={"p": AccessConfig(dm_policy="pairing")}
    )
    assert bare.check(msg("p", "anyone", "dm")) == "pair"
    assert bare.check(msg("p", "anyone", "g", group=True, mentioned=True)) == "allow"


def test_a_dm_policy_that_does_not_exist_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="dm_policy"):
        make_config(tmp_path, channels={"telegram": {"dm_policy": "pair"}})
    with pytest.raises(ConfigError, match="max_pending"):
        make_config(tmp_path, pairing={"max_pending": 0})
