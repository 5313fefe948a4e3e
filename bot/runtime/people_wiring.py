"""The person in the loop, built from config: the approval gate and desk (bot/approvals/), and
pairing codes for unknown senders with their operator place (bot/pipeline/pairing*.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from adapters.base import Channel
from adapters.registry import sections
from bot.approvals.desk import ApprovalDesk
from bot.approvals.gate import StoredGate
from bot.approvals.place import OperatorPlace
from bot.approvals.policy import ApprovalSettings
from bot.pipeline.conversation_state import ConversationState
from bot.pipeline.language import ConversationLanguage
from bot.pipeline.pairing import PairingGate, PairingNotices
from bot.pipeline.pairing_codes import PairingSettings
from bot.pipeline.pairing_place import PairingPlace
from bot.pipeline.places import parse_place
from bot.runtime.config import Config, ConfigError
from bot.storage.backends import AnyStore
from bot.storage.roles import PairingRecords
from tools.registry import ToolRegistry


def approvals(
    config: Config,
    store: AnyStore,
    channels: Mapping[str, Channel],
    registry: ToolRegistry,
    states: ConversationState,
    *,
    serving: bool = True,
) -> tuple[StoredGate, ApprovalDesk]:
    """The approval gate the tool loops ask and the desk that takes the answers, sharing the
    settings and the operator place (a Slack channel the gateway runs, when one is named;
    `serving` False: `bot chat`, which runs no platform channel)."""
    section = config.approvals
    place = None
    if section.place is not None and serving:  # `bot chat` runs no Slack: its user answers
        try:
            place = OperatorPlace(parse_place(section.place), channels)
        except ValueError as exc:
            raise ConfigError(f"approvals.place: {exc}") from None
    settings = ApprovalSettings(
        approvers=frozenset(section.approvers),
        timeout_s=section.timeout_s,
        place=section.place if place is not None else None,
    )
    languages = ConversationLanguage(states, default=config.gateway.language)
    desk = ApprovalDesk(records=store, turns=store, audit=store, settings=settings, place=place)
    gate = StoredGate(
        records=store,
        settings=settings,
        place=place,
        language=languages.of_conversation,
        status=registry.status,
        asked=desk.asked,
    )
    return gate, desk


def pairing_settings(config: Config) -> PairingSettings:
    p = config.pairing
    return PairingSettings(p.ttl_s, p.max_pending, p.resend_s, p.deny_s)


def pairing_place(
    config: Config,
    channels: Mapping[str, Channel],
    records: PairingRecords,
    decided: Callable[[], None],
) -> PairingPlace | None:
    """`pairing.place`: its instance must be a channel this gateway runs (a typo would post
    every code nowhere)."""
    if config.pairing.place is None:
        return None
    place = parse_place(config.pairing.place)
    if place.instance not in channels:
        raise ConfigError(
            f"pairing.place: no enabled channel instance {place.instance!r}; running:"
            f" {sorted(channels)}"
        )
    return PairingPlace(
        place,
        channels,
        records,
        pairing_settings(config),
        approvers=config.pairing.approvers,
        language=config.gateway.language,
        decided=decided,
    )


def pairs(config: Config) -> bool:
    """Whether any channel instance gives unknown senders pairing codes."""
    return any(section.dm_policy == "pairing" for _, section in sections(config.channels))


def pairing_gate(
    config: Config,
    channels: Mapping[str, Channel],
    store: AnyStore,
    notices: PairingNotices,
    *,
    serving: bool,
) -> PairingGate:
    """The gate unknown senders' direct messages pass where `dm_policy` is `pairing`; its
    operator place only where serving (`bot chat` runs no platform channel to post to)."""
    place = pairing_place(config, channels, store, notices.wake) if serving else None
    return PairingGate(store, pairing_settings(config), place=place)
