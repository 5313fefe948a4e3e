"""Which language a conversation's gateway texts are in (`/stop`'s note, a quota refusal, apologies).

In order: the language its newest message came with (the widget's `hello.language`, Telegram's
`language_code`, a platform's user locale), else the one an earlier message came with (kept in
the conversation's state, `settings["language"]`, so every process sharing the state sees it),
else the answering persona's `language:`, else `gateway.language`. A tag we have no catalogue
for counts as none told. A told language is kept only where it differs from what the
conversation would get anyway, so a conversation in the default language leaves no state (a
state is a row, or a Redis hash, kept for good). Texts are never worth failing a message for: a
state that cannot be read or written leaves the choice to what is known without it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from adapters.base import InboundMessage, TryLater
from bot.pipeline.conversation_state import ConversationState, StateConflict, StateSnapshot
from bot.storage.base import StorageError
from content.texts import DEFAULT_LANGUAGE, negotiate

log = logging.getLogger(__name__)

SETTING: Final = "language"  # the conversation state's setting that keeps it

PersonaLanguage = Callable[[str], str | None]  # channel → its persona's `language:`, if set


class ConversationLanguage:
    def __init__(
        self,
        states: ConversationState,
        *,
        default: str = DEFAULT_LANGUAGE,
        persona_language: PersonaLanguage = lambda channel: None,
    ) -> None:
        self.states = states
        self.default = negotiate(default) or DEFAULT_LANGUAGE
        self.persona_language = persona_language

    async def of(self, message: InboundMessage) -> str:
        """The language of the conversation `message` belongs to; the one it came with is kept
        for the conversation when it is new there."""
        return (await self.with_state(message))[0]

    async def with_state(self, message: InboundMessage) -> tuple[str, StateSnapshot | None]:
        """`of`, and the conversation's state as read for it (None: it could not be read), so
        a turn reads the state once for its language and its choices (bot/pipeline/chat_choice.py)."""
        told = negotiate(message.language)
        key, fallback = message.conversation_key, self._fallback(message.chat.channel)
        state: StateSnapshot | None = None
        try:
            state = await self.states.get(key)
            kept = negotiate(state.settings.get(SETTING))
            if told is not None and told != kept and (kept is not None or told != fallback):
                await self.states.update(key, lambda state: state.with_setting(SETTING, told))
        except (StorageError, TryLater, StateConflict) as exc:
            log.warning("language of %s not read or kept: %s", key, exc)
            kept = None
        return told or kept or fallback, state

    async def of_conversation(self, key: str, channel: str) -> str:
        """The language kept for a conversation, with no message at hand (a resumed turn)."""
        try:
            kept = negotiate((await self.states.get(key)).settings.get(SETTING))
        except (StorageError, TryLater) as exc:
            log.warning("language of %s not read: %s", key, exc)
            kept = None
        return kept or self._fallback(channel)

    def _fallback(self, channel: str) -> str:
        try:
            persona = negotiate(self.persona_language(channel))
        except KeyError:  # a persona not (yet) served: its language is not known either
            persona = None
        return persona or self.default
