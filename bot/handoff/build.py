"""The handoff's parts, built once by the app: the desk, its operators' place, the gateway relay.

Built when someone can take a conversation: an operators' place is configured
(`handoff.place`), or the admin view is on (its "take over"). Otherwise there is no handoff at
all: no `/human`, and `transfer_to_human` tells the model nobody can take over.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from adapters.base import Channel, InboundMessage
from adapters.hub.base import EventHub
from agent.personas import PersonaLibrary
from bot.handoff.commands import HandoffStopCommand, HumanCommand
from bot.handoff.desk import Claims, HandoffDesk
from bot.handoff.feed import HandoffFeed
from bot.handoff.model import HandoffSettings
from bot.handoff.place import ChannelPlace
from bot.handoff.relay import HandoffRelay
from bot.pipeline.commands import StopCommand, TaskStopper
from bot.pipeline.conversation_state import ConversationState
from bot.pipeline.conversations import ConversationQueue
from bot.pipeline.persona_choice import PersonaChoice
from bot.pipeline.routing import Command
from bot.runtime.config import Config, ConfigError
from bot.storage.base import Store

if TYPE_CHECKING:  # redis is imported only where redis.url is set (bot/runtime/wiring.py)
    from bot.redis.mode import RedisMode


def build_handoff(
    config: Config,
    store: Store,
    states: ConversationState,
    channels: Mapping[str, Channel],
    claims: Claims,
    personas: PersonaLibrary,
    persona: PersonaChoice,
    redis: RedisMode | None = None,
) -> HandoffRelay | None:
    """With `redis`, the admin view's live events travel through its event hub (else this
    process's own hub)."""
    hub: EventHub | None = None if redis is None else redis.hub
    settings = HandoffSettings.of(config.handoff)
    if settings.place is None and not config.admin.token:
        return None
    place = None
    if settings.place is not None:
        kinds = {str(slack.id) for slack in config.channels.slack if slack.enabled}
        if settings.place.instance not in kinds:
            raise ConfigError(
                f"handoff.place: no enabled Slack instance {settings.place.instance!r}; enabled:"
                f" {sorted(kinds) or 'none'} (channels.slack)"
            )
        place = ChannelPlace(settings.place, channels, settings.admin_url)

    async def session_for(channel: str, conversation_key: str, user_id: str) -> str:
        answering = personas.get(persona.for_channel(channel))
        return await store.active_session(
            channel=channel,
            conversation_key=conversation_key,
            user_id=user_id,
            agent_id=answering.name,
            persona_version=answering.version,
        )

    desk = HandoffDesk(
        settings=settings,
        states=states,
        records=store,
        history=store,
        session_for=session_for,
        channels=channels,
        claims=claims,
        place=place,
        feed=HandoffFeed(hub),
    )
    return HandoffRelay(desk, channels)


def operates(relay: HandoffRelay | None, message: InboundMessage) -> bool:
    """Whether a channel should pass on a message it would drop: an operator's, in the place."""
    return relay is not None and relay.operates(message)


def handoff_commands(
    relay: HandoffRelay | None,
    conversations: ConversationQueue,
    channels: Mapping[str, Channel],
    tasks: TaskStopper | None,
) -> tuple[Command, ...]:
    """`/human`, and the `/stop` that also withdraws a request (none without a handoff)."""
    if relay is None:
        return ()
    stop = StopCommand(conversations, channels, tasks)
    human = HumanCommand(relay.desk, conversations.enqueue)
    return (human, HandoffStopCommand(relay.desk, stop))
