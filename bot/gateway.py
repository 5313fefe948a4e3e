"""The gateway: every channel's inbox. Dedup, access policy, commands, one turn at a time per chat.

Messages that arrive while a conversation's turn runs wait, and are coalesced into its next turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from adapters.base import Channel, ChatRef, InboundMessage, OutboundContent
from agent.coordinator import Coordinator
from agent.personas import PersonaLibrary
from agent.workers import BackgroundResult, Workers
from bot.dedup import MemoryDedup
from bot.storage import SqliteStore
from bot.turn import STOPPED, TurnControl, TurnRunner

log = logging.getLogger(__name__)

Access = Literal["allow", "ignore", "refuse"]

HELP = (
    "**Commands**\n"
    "/new — start a fresh conversation (the bot forgets this one)\n"
    "/stop — stop the answer in progress and drop queued messages\n"
    "/help — this list\n\n"
    "Anything else goes to the assistant."
)
REFUSAL = "Sorry — this bot isn't available to you here. Ask its admin to add you."
MAX_REMEMBERED = 100_000  # conversations whose chat and session are kept in memory


class AccessPolicy(Protocol):
    def check(self, message: InboundMessage) -> Access: ...


@dataclass(frozen=True, slots=True)
class DefaultAccess:
    """Allowlisted users only (when a list is set); in groups, only messages addressed to the bot."""

    allowed_users: frozenset[str] = frozenset()
    group_reply: Literal["mention", "all"] = "mention"

    def check(self, message: InboundMessage) -> Access:
        # Ignore first: group chatter not addressed to the bot must not draw a refusal each time.
        if message.is_group and self.group_reply == "mention" and not message.mentioned:
            return "ignore"
        if self.allowed_users and message.user_id not in self.allowed_users:
            return "refuse"
        return "allow"


@dataclass(frozen=True, slots=True)
class GatewaySettings:
    turn_timeout_s: float = 120.0
    coalesce_ms: int = 0
    persona: str = "default"


@dataclass(slots=True)
class _Conversation:
    key: str
    pending: list[InboundMessage] = field(default_factory=list)
    drain: asyncio.Task[None] | None = None
    control: TurnControl | None = None  # the turn running now


class Gateway:
    def __init__(
        self,
        *,
        channels: Mapping[str, Channel],
        coordinator: Coordinator,
        store: SqliteStore,
        personas: PersonaLibrary,
        dedup: MemoryDedup,
        settings: GatewaySettings,
        access: AccessPolicy | None = None,
        workers: Workers | None = None,
    ) -> None:
        self.channels = channels
        self.coordinator = coordinator
        self.store = store
        self.personas = personas
        self.dedup = dedup
        self.settings = settings
        self.access = access or DefaultAccess()
        self.workers = workers
        if workers is not None:
            workers.deliver = self.deliver_background
        self._conversations: dict[str, _Conversation] = {}
        self._chats: dict[str, ChatRef] = {}  # conversation key -> where to deliver follow-ups
        self._sessions: dict[tuple[str, str], str] = {}  # (conversation, user) -> session id
        self.turns = TurnRunner(
            channels=channels,
            coordinator=coordinator,
            store=store,
            personas=personas,
            dedup=dedup,
            session_for=self._session,
            persona=settings.persona,
            timeout_s=settings.turn_timeout_s,
        )
        self._group: asyncio.TaskGroup | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self.started = asyncio.Event()

    async def run(self) -> None:
        """Own every conversation task until cancelled."""
        async with asyncio.TaskGroup() as group:
            self._group = group
            self.started.set()
            try:
                await asyncio.Future()
            finally:
                self._group = None

    async def wait_idle(self) -> None:
        await self._idle.wait()

    async def handle(self, message: InboundMessage) -> None:
        """The inbox every channel calls. Returns at once; the turn runs in its own task."""
        if not self.dedup.claim(message.event_id):
            log.debug("duplicate event %s dropped", message.event_id)
            return
        decision = self.access.check(message)
        if decision == "ignore":
            return
        if decision == "refuse":
            await self._reply(message, REFUSAL)
            return
        command = message.command
        if command == "help":
            await self._reply(message, HELP)
        elif command == "new":
            await self._new(message)
        elif command == "stop":
            await self._stop(message)
        elif message.text.strip() or message.attachments:
            self._enqueue(message)

    def deliver_background(self, result: BackgroundResult) -> None:
        """A background specialist finished: its result becomes the coordinator's next turn."""
        chat = self._chats.get(result.conversation_key)
        event_id = f"task:{result.task_id}"
        if chat is None or self._group is None or not self.dedup.claim(event_id):
            log.warning("background result %s not delivered (conversation gone)", result.task_id)
            return
        text = (
            f'<task-notification task_id="{result.task_id}" subagent_type="{result.subagent_type}" '
            f'status="{result.status}">\n'
            f"The specialist you dispatched in the background ({result.description}) finished. "
            f"Its result:\n{result.result_text()}\n</task-notification>\n"
            "This comes from the system, not the user: tell the user what it found, in your own words."
        )
        self._enqueue(InboundMessage(chat, result.user_id, text, event_id, None, mentioned=True))

    def _remember_chat(self, message: InboundMessage) -> None:
        self._chats.pop(message.conversation_key, None)
        self._chats[message.conversation_key] = message.chat
        if len(self._chats) > MAX_REMEMBERED:
            del self._chats[next(iter(self._chats))]  # the least recently active

    def _enqueue(self, message: InboundMessage) -> None:
        if self._group is None:
            raise RuntimeError("the gateway is not running: start Gateway.run() first")
        self._remember_chat(message)
        conversation = self._conversations.get(message.conversation_key)
        if conversation is None:
            conversation = _Conversation(message.conversation_key)
            self._conversations[conversation.key] = conversation
        conversation.pending.append(message)
        if conversation.drain is None:
            self._idle.clear()
            conversation.drain = self._group.create_task(self._drain(conversation))

    async def _drain(self, conversation: _Conversation) -> None:
        try:
            if self.settings.coalesce_ms:
                await asyncio.sleep(self.settings.coalesce_ms / 1000)
            while conversation.pending:
                user = conversation.pending[0].user_id
                batch = [m for m in conversation.pending if m.user_id == user]
                conversation.pending = [m for m in conversation.pending if m.user_id != user]
                conversation.control = control = TurnControl()
                try:
                    await self.turns.run(batch, control)
                except Exception:
                    # one conversation's failure (say, its channel cannot deliver) never stops others
                    log.exception("turn in %s failed to deliver", conversation.key)
                finally:
                    conversation.control = None
        finally:
            conversation.drain = None
            if not conversation.pending:
                self._conversations.pop(conversation.key, None)
            if not self._conversations:
                self._idle.set()

    async def _session(self, message: InboundMessage, agent_id: str, version: str) -> str:
        key = (message.conversation_key, message.user_id)
        session_id = self._sessions.get(key)
        if session_id is None:
            session_id = await self.store.active_session(
                channel=message.chat.channel,
                conversation_key=message.conversation_key,
                user_id=message.user_id,
                agent_id=agent_id,
                persona_version=version,
            )
            self._sessions[key] = session_id
            if len(self._sessions) > MAX_REMEMBERED:
                del self._sessions[next(iter(self._sessions))]  # the oldest; the store has it
        return session_id

    async def _new(self, message: InboundMessage) -> None:
        key = (message.conversation_key, message.user_id)
        session_id = self._sessions.pop(key, None)
        if session_id is None:
            persona = self.personas.get(self.settings.persona)
            session_id = await self._session(message, persona.name, persona.version)
            self._sessions.pop(key, None)
        await self.store.close_session(session_id)
        await self._reply(message, "Started a new conversation. What can I do for you?")

    async def _stop(self, message: InboundMessage) -> None:
        """Stop the turn, the conversation's specialists and its queue, together."""
        conversation = self._conversations.get(message.conversation_key)
        killed = self.workers.stop_conversation(message.conversation_key) if self.workers else 0
        dropped = 0
        if conversation is not None:
            dropped = len(conversation.pending)
            conversation.pending.clear()
            if conversation.control is not None:
                conversation.control.stop()  # its placeholder ends as STOPPED: that is the reply
                log.info("stopped %s (dropped %d queued)", message.conversation_key, dropped)
                return
        if killed or dropped:
            await self._reply(message, f"{STOPPED} ({killed} specialist(s), {dropped} queued)")
        else:
            await self._reply(message, "Nothing to stop.")

    async def _reply(self, message: InboundMessage, text: str) -> None:
        channel = self.channels[message.chat.channel]
        try:
            await channel.send(
                message.chat, OutboundContent(text), reply_to=message.message_id, final=True
            )
        except Exception:
            log.exception("could not reply in %s", message.chat.key)
