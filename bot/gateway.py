"""The gateway: every channel's inbox. Dedup, access policy, commands, one turn at a time per chat.

Messages that arrive while a conversation's turn runs wait, and are coalesced into its next turn.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from adapters.base import Channel, ChannelError, ChatRef, InboundMessage, OutboundContent
from agent.coordinator import Coordinator, TurnInput
from agent.personas import PersonaLibrary
from agent.providers.base import ProviderError
from agent.workers import BackgroundResult, Workers
from bot.dedup import MemoryDedup
from bot.delivery import APOLOGY, Delivery
from bot.storage import SqliteStore

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
STOPPED = "⏹ Stopped."
MAX_REMEMBERED_CHATS = 100_000
TIMED_OUT = (
    "Sorry — this took too long, so I stopped. Please try again, perhaps with a smaller request."
)


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
    turn: asyncio.Task[None] | None = None


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
        self._sessions: dict[tuple[str, str], str] = {}
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
        if len(self._chats) > MAX_REMEMBERED_CHATS:
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
                try:
                    await self._run_turn(conversation, batch)
                except Exception:
                    # one conversation's failure (say, its channel cannot deliver) never stops others
                    log.exception("turn in %s failed to deliver", conversation.key)
        finally:
            conversation.drain = None
            if not conversation.pending:
                self._conversations.pop(conversation.key, None)
            if not self._conversations:
                self._idle.set()

    async def _run_turn(self, conversation: _Conversation, batch: list[InboundMessage]) -> None:
        """Run one turn as a task of its own, so `/stop` can cancel it at any point."""
        last = batch[-1]
        delivery = Delivery(self.channels[last.chat.channel], last.chat, reply_to=last.message_id)
        turn_id = uuid.uuid4().hex
        turn = asyncio.create_task(self._turn(turn_id, batch, delivery))
        conversation.turn = turn
        try:
            await turn
        except asyncio.CancelledError:
            if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                turn.cancel()
                raise
            if delivery.handles:
                await delivery.finish(STOPPED)
            else:
                await self._reply(last, STOPPED)
            if await self.store.get_turn(turn_id) is not None:
                await self.store.finish_turn(turn_id, status="stopped")
        finally:
            conversation.turn = None
            await delivery.close()

    async def _turn(self, turn_id: str, batch: list[InboundMessage], delivery: Delivery) -> None:
        last = batch[-1]
        try:
            placeholder = await delivery.start()  # before any other work: the user sees us at once
            persona = self.personas.get(self.settings.persona)
            session_id = await self._session(last, persona.name, persona.version)
            await self.store.create_turn(
                turn_id=turn_id,
                session_id=session_id,
                channel=last.chat.channel,
                conversation_key=last.conversation_key,
                inbound_event_ids=[m.event_id for m in batch],
                placeholder={"chat": last.chat.key, "message_id": placeholder.message_id},
            )
        except Exception:
            log.exception("could not start a turn in %s", last.chat.key)
            if delivery.handles:
                await delivery.finish(APOLOGY)
            return
        turn = TurnInput(
            persona=persona,
            session_id=session_id,
            turn_id=turn_id,
            user_id=last.user_id,
            channel=last.chat.channel,
            conversation_key=last.conversation_key,
            text=_combine(batch),
        )
        try:
            async with asyncio.timeout(self.settings.turn_timeout_s):
                result = await self.coordinator.run_turn(turn, delivery.on_event)
        except TimeoutError:
            log.warning("turn %s timed out after %ss", turn_id, self.settings.turn_timeout_s)
            await delivery.finish(TIMED_OUT)
            await self.store.finish_turn(turn_id, status="failed", error="turn timeout")
            return
        except ProviderError as exc:
            log.error("turn %s failed: model provider: %s", turn_id, exc)
            await delivery.finish(f"Sorry — {exc.user_message}")
            await self.store.finish_turn(
                turn_id, status="failed", error=f"{type(exc).__name__}: {exc}"
            )
            return
        except Exception as exc:
            log.exception("turn %s failed", turn_id)
            await delivery.finish(APOLOGY)
            await self.store.finish_turn(
                turn_id, status="failed", error=f"{type(exc).__name__}: {exc}"
            )
            return
        try:
            await delivery.finish(result.text, tuple(result.display))
        except ChannelError as exc:
            log.error("turn %s answered but not delivered: %s", turn_id, exc)
            await self.store.finish_turn(
                turn_id, status="failed", final_text=result.text, error=str(exc)
            )
            return
        await self.store.finish_turn(turn_id, status="completed", final_text=result.text)

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
        conversation = self._conversations.get(message.conversation_key)
        killed = self.workers.stop_conversation(message.conversation_key) if self.workers else 0
        if conversation is None or (conversation.turn is None and not conversation.pending):
            note = (
                f"{STOPPED} ({killed} background task(s) stopped)" if killed else "Nothing to stop."
            )
            await self._reply(message, note)
            return
        dropped = len(conversation.pending)
        conversation.pending.clear()
        if conversation.turn is not None:
            conversation.turn.cancel()  # its placeholder becomes STOPPED
        else:
            await self._reply(message, STOPPED)
        log.info("stopped %s (dropped %d queued)", message.conversation_key, dropped)

    async def _reply(self, message: InboundMessage, text: str) -> None:
        channel = self.channels[message.chat.channel]
        try:
            await channel.send(
                message.chat, OutboundContent(text), reply_to=message.message_id, final=True
            )
        except Exception:
            log.exception("could not reply in %s", message.chat.key)


def _combine(batch: list[InboundMessage]) -> str:
    parts = []
    for message in batch:
        text = message.text.strip()
        for attachment in message.attachments:
            label = attachment.name or attachment.mime_type or ""
            text += f"\n[attachment: {attachment.kind} {label}]".rstrip()
        parts.append(text.strip())
    return "\n\n".join(parts)
