"""The channel registry: every channel package contributes a spec; the app builds what is enabled.

A channel package `adapters/<name>/` has an import-light `config.py` with its config section
(an `AccessConfig`) and a `SPEC`, and a `factory.py` whose `build(section, services)` returns the
channel. The factory is imported only when the channel is enabled (aiogram alone takes seconds
to import). To add a channel: write the package, add its section to `ChannelsConfig`
(bot/runtime/config/schema.py) and its name to `PACKAGES` below.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from adapters.access import AccessConfig
from adapters.accounts import Accounts
from adapters.api.records import SessionRecords
from adapters.base import BlobLinks, Channel, InboundMessage, Leader
from adapters.budget import RateBudget
from adapters.history import Claims, ConversationHistory
from adapters.hub import EventHub
from adapters.platform_calls import NO_PLATFORM_CALLS, PlatformCalls
from adapters.rates import InboundRates
from content.blobs import BlobStore

PACKAGES = ("websocket", "telegram", "slack", "feishu", "api")  # the order channels start in


@dataclass(frozen=True, slots=True)
class ChannelServices:
    """What the app hands every factory: facts about the server and the shared seams."""

    public_url: str | None = None
    # The gateway's access policy, for replies a channel sends on its own (to stickers, say).
    admits: Callable[[InboundMessage], bool] = lambda message: True
    # Shared seams; None: the channel's in-process default (a networked one spans processes).
    event_hub: EventHub | None = None
    rate_budget: RateBudget | None = None
    # Users' message limits (adapters/rates/); None: counted in this process.
    inbound_rates: InboundRates | None = None
    # Every call a channel makes to its platform, for /metrics (adapters/platform_calls.py).
    platform_calls: PlatformCalls = NO_PLATFORM_CALLS
    # Where the sessions API keeps its sessions and transcripts (the gateway's store).
    session_records: SessionRecords | None = None
    # The stored transcript and durable claims (for a channel that replays its conversations);
    # None: the channel knows only what this process saw.
    history: ConversationHistory | None = None
    claims: Claims | None = None
    # The gateway's own claims, where they are the store's (embedded): a channel that must know
    # whether a message is a first before the gateway sees it claims it here, for the gateway
    # (whose claim then costs nothing), instead of writing a claim of its own. None: the
    # gateway claims elsewhere (Redis).
    gateway_claims: Claims | None = None
    # Whether the gateway answered in a conversation (by its key), from the store: a reply in
    # a Slack thread the bot was answering is answered after a restart too. None: no store.
    answered: Callable[[str], Awaitable[bool]] | None = None
    # Work one process at a time may do (Telegram long polling); None: this process alone.
    leader: Leader | None = None
    # Who runs each platform account (adapters/accounts.py); None: nobody checks.
    accounts: Accounts | None = None
    # The key of the conversation under a key prefix where a user's newest turn was, from the
    # store: `(channel, key_prefix, user_id)`; a Slack slash command in a channel targets the
    # user's latest thread there, after a restart or on another process too. None: no store.
    latest_conversation: Callable[[str, str, str], Awaitable[str | None]] | None = None
    # Files: the blob store, signed links to its blobs for clients, and the key that signs
    # upload tokens and attachment references (the same in every process; None: one made per
    # process). No store or links: no files from or to the web socket and the sessions API.
    blobs: BlobStore | None = None
    blob_links: BlobLinks | None = None
    upload_secret: bytes | None = None
    # How the bot introduces itself in an empty conversation, from the coordinator persona:
    # `bot_name`, `welcome`, `suggestions` (those it sets). The web socket's `ready` carries them.
    introduction: Callable[[], Mapping[str, Any]] = dict
    # The gateway's commands this deployment offers beyond every chat's (`human`, `schedule`,
    # `model`, `persona`): a channel with a command menu lists them too.
    menu: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ChannelSpec:
    name: str
    factory: str  # "module:function", imported when the channel is enabled

    def build(self, section: AccessConfig, services: ChannelServices) -> Channel:
        module, _, function = self.factory.partition(":")
        build: Callable[[Any, ChannelServices], Channel] = getattr(
            importlib.import_module(module), function
        )
        return build(section, services)


def specs() -> Iterator[ChannelSpec]:
    for name in PACKAGES:
        spec: ChannelSpec = importlib.import_module(f"adapters.{name}.config").SPEC
        yield spec


def sections(channels_config: Any) -> Iterator[tuple[ChannelSpec, AccessConfig]]:
    """Every channel instance with its config section, enabled or not: `channels.<name>`, or
    each item of it where a kind runs several accounts (a list; each section names its `id`)."""
    for spec in specs():
        value = getattr(channels_config, spec.name)
        for section in value if isinstance(value, list) else [value]:
            yield spec, section


def instance_name(spec: ChannelSpec, section: AccessConfig) -> str:
    """The name a channel instance goes by: its chats' keys start with it."""
    return getattr(section, "id", None) or spec.name


def build_enabled(channels_config: Any, services: ChannelServices) -> list[Channel]:
    return [
        spec.build(section, services)
        for spec, section in sections(channels_config)
        if getattr(section, "enabled", False)
    ]
