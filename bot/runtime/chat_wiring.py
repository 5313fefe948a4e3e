"""The app's parts for per-chat choices and budgets: `/model`, `/persona`, `/usage`, the soft
quota limit's cheaper model and the daily cost alert, built from config.

Beside bot/runtime/wiring.py (which builds the seams these read: the conversation state, the
quota counters), so that the one decides where state lives and this what is chosen with it.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent.personas import PersonaLibrary
from agent.providers.base import Provider
from bot.ops.cost_watch import CostObserver, CostWatch
from bot.pipeline.chat_choice import ChatChoices, ModelMenu
from bot.pipeline.choice_commands import ModelCommand, PersonaCommand
from bot.pipeline.conversation_state import ConversationState
from bot.pipeline.persona_choice import PersonaChoice
from bot.pipeline.quota import Quotas, QuotaState
from bot.pipeline.routing import Command
from bot.pipeline.usage_command import UsageCommand
from bot.runtime.config import Config, ConfigError
from bot.runtime.config.choices import ModelPrice, model_prices
from bot.storage.backends import AnyStore


def prices(config: Config, models: Mapping[str, Provider]) -> dict[str, ModelPrice]:
    """What a model's tokens cost, the choices' served model names known (their providers')."""
    return model_prices(config, {name: model.model for name, model in models.items()})


def chat_choices(
    config: Config,
    states: ConversationState,
    quotas: Quotas,
    choice: PersonaChoice,
    personas: PersonaLibrary,
    models: Mapping[str, Provider],
    default_model: str,
) -> ChatChoices:
    """Each conversation's persona (`personas.switchable`), model (`llm.choices`, each served
    by `models[name]`) and budget (`quotas.soft_model` past a soft ratio)."""
    menu = ModelMenu(config.llm.choices, models, default_display=default_model)
    return ChatChoices(
        states,
        personas=choice,
        library=personas,
        switchable=frozenset(config.personas.switchable),
        menu=menu,
        quotas=quotas,
        soft_model=config.quotas.soft_model,
    )


def chat_commands(
    config: Config, choices: ChatChoices, personas: PersonaLibrary, store: AnyStore
) -> list[Command]:
    """The commands beyond /new, /stop and /help: `/model` and `/persona` where an admin
    offers a choice, `/usage` always."""
    commands: list[Command] = []
    if config.llm.choices:
        commands.append(ModelCommand(choices))
    if config.personas.switchable:
        commands.append(PersonaCommand(choices, personas))
    commands.append(UsageCommand(store, prices(config, choices.menu.providers)))
    return commands


def check_switchable(config: Config, personas: PersonaLibrary) -> None:
    """Every persona `personas.switchable` names must exist: a typo would offer nothing."""
    for name in config.personas.switchable:
        try:
            personas.get(name)
        except KeyError as exc:
            raise ConfigError(f"personas.switchable: {exc.args[0]}") from None


def cost_watch(
    config: Config,
    store: AnyStore,
    models: Mapping[str, Provider],
    marks: QuotaState,
    observer: CostObserver | None,
) -> CostWatch | None:
    """The daily cost alert, on the prices `/usage` counts with (bot/ops/cost_watch.py); None
    when it is off (`quotas.cost_alert_factor: 0`) or nothing has a price to count."""
    factor, priced = config.quotas.cost_alert_factor, prices(config, models)
    if factor <= 0 or not priced:
        return None
    return CostWatch(store, priced, factor=factor, marks=marks, observer=observer)
