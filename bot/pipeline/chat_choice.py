"""Which persona and model answer a conversation's turn, and whether it may dispatch specialists.

Read at the start of every turn from the conversation's state (`settings["model"]` and
`settings["persona"]`, set by `/model` and `/persona`: bot/pipeline/choice_commands.py), so a
switch made through any process is seen by every other one sharing the state (the store, or
Redis). A choice no longer offered (the admin took it out of `llm.choices`, or off this channel
instance) falls back to the default, silently: the user's next `/model` shows what is left.

Past a quota's soft ratio (bot/pipeline/quota.py `Quotas.soft`), the cheaper `quotas.soft_model`
answers and no specialist is dispatched; the conversation is told once per quota window (the
state's `settings["budget_told"]` names the window), wherever the turn runs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from adapters.base import InboundMessage, TryLater
from agent.personas import PersonaLibrary
from agent.providers.base import Provider
from bot.pipeline.conversation_state import ConversationState, StateConflict, StateSnapshot
from bot.pipeline.persona_choice import PersonaChoice
from bot.pipeline.quota import Quotas, SoftReached
from bot.runtime.config.choices import ModelChoice, ModelPrice
from bot.storage.base import StorageError
from content.texts import t

log = logging.getLogger(__name__)

MODEL: Final = "model"  # the conversation state's settings these live in
PERSONA: Final = "persona"
BUDGET_TOLD: Final = "budget_told"


@dataclass(frozen=True, slots=True)
class ModelOption:
    """One of `llm.choices`, as users see it."""

    name: str
    display: str
    price: ModelPrice | None
    channels: frozenset[str]  # empty: offered on every channel instance

    def offered_on(self, channel: str) -> bool:
        return not self.channels or channel in self.channels


class ModelMenu:
    """The models a conversation may switch to, with the provider that serves each."""

    def __init__(
        self,
        choices: Sequence[ModelChoice],
        providers: Mapping[str, Provider],
        *,
        default_display: str,
    ) -> None:
        self.options = tuple(
            ModelOption(c.name, c.shown, c.price, frozenset(c.channels)) for c in choices
        )
        self._by_name = {o.name.lower(): o for o in self.options}
        self.providers = dict(providers)
        self.default_display = default_display

    def offered(self, channel: str) -> list[ModelOption]:
        return [o for o in self.options if o.offered_on(channel)]

    def find(self, name: str | None, channel: str | None = None) -> ModelOption | None:
        """The option called `name` (any case), if offered on `channel` (None: anywhere)."""
        option = self._by_name.get((name or "").lower())
        if option is None or (channel is not None and not option.offered_on(channel)):
            return None
        return option

    def provider(self, option: ModelOption) -> Provider:
        return self.providers[option.name]


NO_MODELS: Final = ModelMenu((), {}, default_display="default")


@dataclass(frozen=True, slots=True)
class TurnChoice:
    """What a turn runs with; `model` is None when the default model answers."""

    persona: str
    model: ModelOption | None = None
    provider: Provider | None = None
    specialists: bool = True
    budget_notice: str | None = None  # said once, with this turn's answer


class ChatChoices:
    """The per-turn read of a conversation's persona, model and budget."""

    def __init__(
        self,
        states: ConversationState,
        *,
        personas: PersonaChoice,
        library: PersonaLibrary | None = None,
        switchable: frozenset[str] = frozenset(),
        menu: ModelMenu = NO_MODELS,
        quotas: Quotas | None = None,
        soft_model: str | None = None,
    ) -> None:
        self.states = states
        self.personas = personas
        self.library = library  # a switched-to persona whose file is gone: the default answers
        self.switchable = switchable
        self.menu = menu
        self.quotas = quotas
        # the cheaper model past a soft limit: offered or not on the channel, it serves there
        self.soft_option = menu.find(soft_model) if soft_model else None

    def default_persona(self, channel: str) -> str:
        return self.personas.for_channel(channel)

    async def for_turn(
        self, message: InboundMessage, language: str, state: StateSnapshot | None = None
    ) -> TurnChoice:
        """The turn's persona, model and specialists. `state`: the conversation's, if the turn
        read it already (for its language); else it is read here. A state that cannot be read
        leaves the defaults: a chosen model is not worth failing a turn for."""
        channel, key = message.chat.channel, message.conversation_key
        if not (self.menu.options or self.switchable):  # nothing to choose: nothing to read
            return TurnChoice(self.default_persona(channel))
        if state is None:
            try:
                state = await self.states.get(key)
            except (StorageError, TryLater) as exc:
                log.warning("choices of %s not read; the defaults answer: %s", key, exc)
                state = StateSnapshot()
        persona = self.persona_of(state, channel)
        option = self.menu.find(state.settings.get(MODEL), channel)
        soft = None if self.soft_option is None else await self._soft(message)
        if soft is None or self.soft_option is None:
            provider = None if option is None else self.menu.provider(option)
            return TurnChoice(persona, option, provider)
        notice = None
        if state.settings.get(BUDGET_TOLD) != soft.mark:
            notice = await self._tell_once(key, soft, language)
        cheap = self.soft_option
        return TurnChoice(persona, cheap, self.menu.provider(cheap), False, notice)

    async def chosen_provider(self, key: str, channel: str) -> Provider | None:
        """The provider of the conversation's chosen model (None: the default), for a turn
        resumed after its process died (its budget was judged, and told, when it started)."""
        try:
            state = await self.states.get(key)
        except (StorageError, TryLater) as exc:
            log.warning("model of %s not read; the default answers: %s", key, exc)
            return None
        option = self.menu.find(state.settings.get(MODEL), channel)
        return None if option is None else self.menu.provider(option)

    async def persona_for(self, message: InboundMessage) -> str:
        """The persona answering the message's conversation (a state that cannot be read: the
        channel's), e.g. whose session `/new` closes."""
        channel, key = message.chat.channel, message.conversation_key
        try:
            return self.persona_of(await self.states.get(key), channel)
        except (StorageError, TryLater) as exc:
            log.warning("persona of %s not read: %s", key, exc)
            return self.default_persona(channel)

    def persona_of(self, state: StateSnapshot, channel: str) -> str:
        chosen = state.settings.get(PERSONA)
        if chosen is None or chosen not in self.switchable or not self._exists(chosen):
            return self.default_persona(channel)
        return chosen

    def _exists(self, name: str) -> bool:
        if self.library is None:
            return True
        try:
            self.library.get(name)
        except KeyError:
            return False
        return True

    async def _soft(self, message: InboundMessage) -> SoftReached | None:
        if self.quotas is None:
            return None
        try:
            return await self.quotas.soft(message)
        except (StorageError, TryLater) as exc:
            log.warning("soft limits of %s not read: %s", message.conversation_key, exc)
            return None

    async def _tell_once(self, key: str, soft: SoftReached, language: str) -> str | None:
        """The notice, if this process is the one that marks the window told (a turn on
        another process may have just done it: then none)."""
        told = False

        def mark(state: StateSnapshot) -> StateSnapshot:
            nonlocal told
            told = state.settings.get(BUDGET_TOLD) != soft.mark
            return state.with_setting(BUDGET_TOLD, soft.mark) if told else state

        try:
            await self.states.update(key, mark)
        except (StorageError, TryLater, StateConflict) as exc:
            log.warning("budget notice of %s not kept: %s", key, exc)
        if not told:
            return None
        assert self.soft_option is not None
        who = t(language, f"quota.who.{soft.whose}")
        window = t(language, f"budget.window.{soft.window}")
        return t(language, "budget.soft", who=who, window=window, model=self.soft_option.display)
