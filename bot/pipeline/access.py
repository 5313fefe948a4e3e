"""The access policy: `gateway.allowed_users` and `group_reply`, then each channel's own keys.

Every channel section takes the same access keys (`adapters.access.AccessConfig`):
`allowed_users`, `allowed_chats`, `group_reply` (which overrides `gateway.group_reply`) and
`dm_policy`, which decides direct messages from users no list names: `allowlist` as before,
`open` admits them, `pairing` sends them to the pairing gate (bot/pipeline/pairing.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from adapters.access import AccessConfig
from adapters.base import InboundMessage
from bot.pipeline.routing import Access

GroupReply = Literal["mention", "all"]
DmPolicy = Literal["allowlist", "pairing", "open"]


@dataclass(frozen=True, slots=True)
class Allowlist:
    """Empty: everyone. Otherwise a listed user anywhere, or anyone in a listed chat."""

    users: frozenset[str] = frozenset()
    chats: frozenset[str] = frozenset()

    @classmethod
    def of(cls, users: Iterable[str] = (), chats: Iterable[str] = ()) -> Allowlist:
        return cls(frozenset(users), frozenset(chats))

    def admits(self, message: InboundMessage) -> bool:
        if not self.users and not self.chats:
            return True
        return self.names(message)

    def names(self, message: InboundMessage) -> bool:
        """The sender or the chat is listed (an empty list names nobody)."""
        return message.user_id in self.users or message.chat.chat_id in self.chats


@dataclass(frozen=True, slots=True)
class ChannelRule:
    allowlist: Allowlist = Allowlist()
    group_reply: GroupReply | None = None  # None: the gateway's
    dm_policy: DmPolicy = "allowlist"


@dataclass(frozen=True, slots=True)
class AccessRules:
    """Ignore first (chatter not addressed to the bot never draws a refusal), then refuse."""

    allowed_users: frozenset[str] = frozenset()
    group_reply: GroupReply = "mention"
    channels: Mapping[str, ChannelRule] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        *,
        allowed_users: Iterable[str],
        group_reply: GroupReply,
        sections: Mapping[str, AccessConfig],
    ) -> AccessRules:
        rules = {
            name: ChannelRule(
                Allowlist.of(section.allowed_users, section.allowed_chats),
                section.group_reply,
                section.dm_policy,
            )
            for name, section in sections.items()
        }
        return cls(frozenset(allowed_users), group_reply, rules)

    def check(self, message: InboundMessage) -> Access:
        rule = self.channels.get(message.chat.channel, ChannelRule())
        group_reply = rule.group_reply or self.group_reply
        if message.is_group and group_reply == "mention" and not message.mentioned:
            return "ignore"
        if not message.is_group and rule.dm_policy != "allowlist":
            if rule.dm_policy == "open" or rule.allowlist.names(message):
                return "allow"
            return "allow" if message.user_id in self.allowed_users else "pair"
        if self.allowed_users and message.user_id not in self.allowed_users:
            return "refuse"
        return "allow" if rule.allowlist.admits(message) else "refuse"
