"""`/model` and `/persona`: list what a conversation may switch to, switch it, or go back.

`/model` lists the models an admin offers on this channel instance (`llm.choices`, each with its
display name and price), `/model NAME` switches this conversation, `/model default` goes back.
`/persona` does the same for the personas an admin marks switchable (`personas.switchable`).
The choice is kept in the conversation's state (bot/pipeline/chat_choice.py reads it at the
start of each turn), so every process sharing the state answers with it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from adapters.base import InboundMessage, TryLater
from agent.personas import PersonaLibrary
from bot.pipeline.chat_choice import MODEL, PERSONA, ChatChoices, ModelOption
from bot.pipeline.conversation_state import StateConflict
from bot.pipeline.routing import Reply
from bot.storage.base import StorageError
from content.texts import t

log = logging.getLogger(__name__)

BACK = "default"


def argument(message: InboundMessage) -> str:
    """What follows the command word (`/model mini` → "mini"; nothing → "")."""
    parts = message.text.strip().split(maxsplit=1)
    return parts[1].strip() if len(parts) > 1 else ""


async def _keep(
    choices: ChatChoices, message: InboundMessage, name: str, value: str | None
) -> bool:
    """The setting kept for the conversation; False (and the user told) if it could not be."""
    try:
        await choices.states.update(
            message.conversation_key, lambda state: state.with_setting(name, value)
        )
    except (StorageError, TryLater, StateConflict) as exc:
        log.error("%s of %s not kept: %s", name, message.conversation_key, exc)
        return False
    return True


def _price(option: ModelOption, language: str | None) -> str:
    if option.price is None:
        return ""
    return " " + t(
        language,
        "model.price",
        input=f"{option.price.input_per_mtok:g}",
        output=f"{option.price.output_per_mtok:g}",
    )


@dataclass(frozen=True, slots=True)
class ModelCommand:
    choices: ChatChoices
    name: str = "model"
    help: str = "model.help"

    async def run(self, message: InboundMessage, reply: Reply) -> None:
        language, channel = message.language, message.chat.channel
        menu = self.choices.menu
        wanted = argument(message)
        if not wanted:
            await reply(message, await self._listing(message))
            return
        if wanted.lower() == BACK:
            if await _keep(self.choices, message, MODEL, None):
                await reply(message, t(language, "model.back", model=menu.default_display))
            else:
                await reply(message, t(language, "choice.not_kept"))
            return
        option = menu.find(wanted, channel)
        if option is None:
            names = ", ".join([BACK, *(o.name for o in menu.offered(channel))])
            await reply(message, t(language, "model.unknown", name=wanted, names=names))
        elif await _keep(self.choices, message, MODEL, option.name):
            await reply(message, t(language, "model.switched", model=option.display))
        else:
            await reply(message, t(language, "choice.not_kept"))

    async def _listing(self, message: InboundMessage) -> str:
        language, channel = message.language, message.chat.channel
        menu = self.choices.menu
        offered = menu.offered(channel)
        if not offered:
            return t(language, "model.none", model=menu.default_display)
        try:
            state = await self.choices.states.get(message.conversation_key)
            current = menu.find(state.settings.get(MODEL), channel)
        except (StorageError, TryLater):
            current = None
        mark = " " + t(language, "choice.current")
        lines = [f"• {BACK} — {menu.default_display}" + (mark if current is None else "")]
        lines += [
            f"• {o.name} — {o.display}{_price(o, language)}" + (mark if o is current else "")
            for o in offered
        ]
        return "\n".join([t(language, "model.list_head"), *lines, t(language, "model.list_foot")])


@dataclass(frozen=True, slots=True)
class PersonaCommand:
    choices: ChatChoices
    library: PersonaLibrary
    name: str = "persona"
    help: str = "persona.help"

    async def run(self, message: InboundMessage, reply: Reply) -> None:
        language = message.language
        wanted = argument(message)
        offered = self._offered()
        if not wanted:
            await reply(message, await self._listing(message, offered))
            return
        if wanted.lower() == BACK:
            value = None
        elif wanted in offered:
            value = wanted
        else:
            names = ", ".join([BACK, *offered])
            await reply(message, t(language, "persona.unknown", name=wanted, names=names))
            return
        if not await _keep(self.choices, message, PERSONA, value):
            await reply(message, t(language, "choice.not_kept"))
            return
        shown = self._shown(value or self.choices.default_persona(message.chat.channel))
        await reply(message, t(language, "persona.switched", persona=shown))

    def _offered(self) -> list[str]:
        """The switchable personas whose files serve now, by name."""
        return [name for name in sorted(self.choices.switchable) if self._served(name)]

    def _served(self, name: str) -> bool:
        try:
            self.library.get(name)
        except KeyError:
            return False
        return True

    def _shown(self, name: str) -> str:
        try:
            return self.library.get(name).display_name or name
        except KeyError:
            return name

    async def _listing(self, message: InboundMessage, offered: list[str]) -> str:
        language = message.language
        default = self.choices.default_persona(message.chat.channel)
        if not offered:
            return t(language, "persona.none", persona=self._shown(default))
        try:
            state = await self.choices.states.get(message.conversation_key)
            current = self.choices.persona_of(state, message.chat.channel)
        except (StorageError, TryLater):
            current = default
        mark = " " + t(language, "choice.current")
        lines = [f"• {BACK} — {self._shown(default)}" + (mark if current == default else "")]
        for name in offered:
            about = self.library.get(name).description
            lines.append(f"• {name} — {about}" + (mark if current == name else ""))
        head, foot = t(language, "persona.list_head"), t(language, "persona.list_foot")
        return "\n".join([head, *lines, foot])
