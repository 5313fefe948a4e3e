"""The access policy every channel shares: allowlists per channel, group_reply per channel."""

from __future__ import annotations

from adapters.access import AccessConfig
from adapters.base import ChatRef, InboundMessage
from bot.pipeline.access import AccessRules


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
