"""Which session a conversation's messages belong to, and which persona answers it.

A session is read from the store every turn (one indexed read), never cached: another process
may have run `/new`. The persona is the conversation's choice (`/persona`, bot/pipeline/
chat_choice.py) where one was made, else the channel's; messages a person holds (waiting or
human mode) go to the channel persona's session, as the handoff's context does.
"""

from __future__ import annotations

from adapters.base import InboundMessage
from agent.personas import PersonaLibrary
from bot.pipeline.chat_choice import ChatChoices
from bot.pipeline.persona_choice import PersonaChoice
from bot.storage.roles import TurnRecords


class ConversationSessions:
    def __init__(
        self,
        turn_log: TurnRecords,
        personas: PersonaLibrary,
        persona: PersonaChoice,
        choices: ChatChoices | None = None,
    ) -> None:
        self.turn_log = turn_log
        self.personas = personas
        self.persona = persona
        self.choices = choices

    async def session(self, message: InboundMessage, agent_id: str, version: str) -> str:
        return await self.turn_log.active_session(
            channel=message.chat.channel,
            conversation_key=message.conversation_key,
            user_id=message.user_id,
            agent_id=agent_id,
            persona_version=version,
        )

    async def persona_name(self, message: InboundMessage) -> str:
        """The agent id of a conversation's sessions: the persona answering it (`/persona`)."""
        if self.choices is None:
            return self.personas.get(self.persona.for_channel(message.chat.channel)).name
        return self.personas.get(await self.choices.persona_for(message)).name

    async def held_session(self, message: InboundMessage) -> str:
        persona = self.personas.get(self.persona.for_channel(message.chat.channel))
        return await self.session(message, persona.name, persona.version)

    def persona_language(self, channel: str) -> str | None:
        """The `language:` of the persona answering on a channel, if it sets one."""
        return self.personas.get(self.persona.for_channel(channel)).language
