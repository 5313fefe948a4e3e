"""The gateway's own commands: `/new` and `/stop` (`/help` is the table's, bot/pipeline/routing.py)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from adapters.base import Channel, DropNotice, InboundMessage
from bot.pipeline.conversations import ConversationQueue, Stopped
from bot.pipeline.routing import HELP_LINE, Reply, help_text
from content.texts import DEFAULT_LANGUAGE, t

log = logging.getLogger(__name__)

# the texts in English (tests); each command says them in the conversation's language
NEW_LINE: Final = t(DEFAULT_LANGUAGE, "command.new_help")
STOP_LINE: Final = t(DEFAULT_LANGUAGE, "command.stop_help")
STARTED_NEW: Final = t(DEFAULT_LANGUAGE, "command.started_new")
NOTHING_TO_STOP: Final = t(DEFAULT_LANGUAGE, "command.nothing_to_stop")
# The default table's `/help` (what `CommandTable((NewCommand…, StopCommand…))` generates).
HELP: Final = help_text((("new", NEW_LINE), ("stop", STOP_LINE), ("help", HELP_LINE)))
# The app's (bot/runtime/app.py): `/usage` too, always; `/model` and `/persona` where offered;
# `/schedule` where schedules are kept: not in `bot chat` (CHAT_HELP)
CHAT_HELP: Final = help_text(
    (("new", NEW_LINE), ("stop", STOP_LINE), ("usage", "usage.help"), ("help", HELP_LINE))
)
APP_HELP: Final = help_text(
    (
        ("new", NEW_LINE),
        ("stop", STOP_LINE),
        ("usage", "usage.help"),
        ("schedule", "schedule.help"),
        ("help", HELP_LINE),
    )
)


class SessionCloser(Protocol):
    async def close_active_sessions(
        self, *, channel: str, conversation_key: str, user_id: str, agent_id: str = "default"
    ) -> int: ...


class TaskStopper(Protocol):
    def stop_conversation(self, conversation_key: str) -> int: ...


@dataclass(frozen=True, slots=True)
class NewCommand:
    """Close the conversation's active session: the next turn starts a fresh one."""

    sessions: SessionCloser
    # the name of the persona answering the message's conversation: its sessions' agent id
    agent_id: Callable[[InboundMessage], Awaitable[str]]
    name: str = "new"
    help: str = "command.new_help"

    async def run(self, message: InboundMessage, reply: Reply) -> None:
        await self.sessions.close_active_sessions(
            channel=message.chat.channel,
            conversation_key=message.conversation_key,
            user_id=message.user_id,
            agent_id=await self.agent_id(message),
        )
        await reply(message, t(message.language, "command.started_new"))


@dataclass(frozen=True, slots=True)
class StopCommand:
    """Stop the turn, the conversation's specialists and its queue, together."""

    conversations: ConversationQueue
    channels: Mapping[str, Channel]
    tasks: TaskStopper | None = None
    name: str = "stop"
    help: str = "command.stop_help"

    async def run(self, message: InboundMessage, reply: Reply) -> None:
        key = message.conversation_key
        killed = self.tasks.stop_conversation(key) if self.tasks is not None else 0
        stopped = await self.conversations.stop(key)
        await self._tell_dropped(message, stopped)
        if stopped.running:  # its placeholder ends as STOPPED: that is the reply
            log.info("stopped %s (dropped %d queued)", key, stopped.dropped)
        elif killed or stopped.dropped:
            counts = {"specialists": killed, "queued": stopped.dropped}
            await reply(message, t(message.language, "turn.stopped_counts", **counts))
        else:
            await reply(message, t(message.language, "command.nothing_to_stop"))

    async def _tell_dropped(self, message: InboundMessage, stopped: Stopped) -> None:
        """Each message the stop dropped from the queue, told so where its channel can (the web
        socket marks it "not sent"); the note above only counts them, and only when no turn ran."""
        channel = self.channels.get(message.chat.channel)
        if not stopped.messages or not isinstance(channel, DropNotice):
            return
        try:
            await channel.dropped(stopped.messages, "stopped")
        except Exception:  # the stop itself holds; the senders just are not told
            log.exception("could not tell %s which messages were dropped", message.chat.key)
