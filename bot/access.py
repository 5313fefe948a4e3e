"""Per-channel allowlists (`channels.<name>.allowed_users` / `allowed_chats`) over the gateway's policy."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from adapters.base import InboundMessage
from bot.gateway import Access, AccessPolicy


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
        return message.user_id in self.users or message.chat.chat_id in self.chats


@dataclass(frozen=True, slots=True)
class ChannelAccess:
    """`base` first (so chatter not addressed to the bot stays ignored), then the channel's list."""

    base: AccessPolicy
    allowlists: Mapping[str, Allowlist]

    def check(self, message: InboundMessage) -> Access:
        decision = self.base.check(message)
        allowlist = self.allowlists.get(message.chat.channel)
        if decision == "allow" and allowlist is not None and not allowlist.admits(message):
            return "refuse"
        return decision
