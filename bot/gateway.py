"""The gateway: every channel's inbox. Dedup, access policy, commands, then the conversation queue.

Messages that arrive while a conversation's turn runs wait in the queue (bot/conversations.py)
and are coalesced into its next turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from adapters.base import Channel, ChatRef, DropNotice, InboundMessage, OutboundContent, TryLater
from agent.coordinator import Coordinator
from agent.log_context import bound
from agent.personas import PersonaLibrary
from agent.workers import BackgroundResult, Workers
from bot.conversations import ClaimingQueue, ConversationQueue, QueueFull, Stopped, TurnSignal
from bot.dedup import Dedup
from bot.metrics import NO_METRICS, GatewayMetrics
from bot.persona_choice import PersonaChoice
from bot.quota import Quotas
from bot.resume import ResumeSettings, TurnResumer
from bot.storage.base import GatewayStore, StorageError
from bot.turn import RESUME_EVENT, STOPPED, TurnRunner

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
QUEUE_FULL = (
    "Too many of your messages are waiting for an answer here, so I dropped this one. "
    "Wait for the answer, or send /stop to drop the queue."
)
UNCLAIM_RETRIES_S = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6)
NOT_TAKEN = (
    "Sorry — I can't take messages just now (a storage problem). Please try again in a minute."
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
    persona: PersonaChoice = PersonaChoice()
    resume: ResumeSettings = ResumeSettings()


class Gateway:
    def __init__(
        self,
        *,
        channels: Mapping[str, Channel],
        coordinator: Coordinator,
        store: GatewayStore,
        personas: PersonaLibrary,
        dedup: Dedup,
        conversations: ConversationQueue,
        settings: GatewaySettings,
        access: AccessPolicy | None = None,
        workers: Workers | None = None,
        metrics: GatewayMetrics = NO_METRICS,
        quotas: Quotas | None = None,
    ) -> None:
        self.channels = channels
        self.metrics = metrics
        self.coordinator = coordinator
        self.store = store
        self.personas = personas
        self.dedup = dedup
        self.conversations = conversations
        # Redis: a plain message's event is claimed by the script that queues it
        self._claiming = (
            conversations
            if isinstance(conversations, ClaimingQueue) and conversations.claims_for(dedup)
            else None
        )
        self.settings = settings
        self.access = access or DefaultAccess()
        self.workers = workers
        if workers is not None:
            workers.deliver = self.deliver_background
        self.turns = TurnRunner(
            channels=channels,
            coordinator=coordinator,
            store=store,
            personas=personas,
            dedup=dedup,
            session_for=self._session,
            persona=settings.persona,
            timeout_s=settings.turn_timeout_s,
            metrics=metrics,
            quotas=quotas,
        )
        self.turns.resumer = self.resumer = TurnResumer(self.turns, settings.resume)
        # Cleared while interrupted turns are queued at start (bot/recovery.py): a new message
        # waits, so it never runs before the unfinished turn of its conversation.
        self.accepting = asyncio.Event()
        self.accepting.set()

    async def run(self) -> None:
        """Run every conversation's turns until cancelled; the ends of turns the store refused
        to record are retried meanwhile, and once more after the last turn (bot/turn_ends.py)."""
        try:
            async with asyncio.TaskGroup() as group:
                retrying = group.create_task(self.turns.ends.retry(), name="turn ends")
                try:
                    await self.conversations.run(self.turns.run)
                finally:
                    retrying.cancel()
        finally:
            await self.turns.ends.flush()

    async def wait_idle(self) -> None:
        await self.conversations.wait_idle()

    async def handle(self, message: InboundMessage) -> None:
        """The inbox every channel calls. Returns at once; the turn runs in its own task."""
        if not self.accepting.is_set():
            await self.accepting.wait()
        # its log lines (a duplicate, a refusal, /stop) name the conversation (JSON log)
        with bound(conversation_key=message.conversation_key, channel=message.chat.channel):
            await self._handle(message)

    async def _handle(self, message: InboundMessage) -> None:
        if self._claiming is not None and self._for_the_queue(message):
            await self._enqueue_new(self._claiming, message)
            return
        try:
            claimed = await self.dedup.claim(message.event_id)
        except StorageError as exc:  # nothing is recorded: tell the user rather than drop it
            log.error(
                "event %s in %s not taken: storage: %s", message.event_id, message.chat.key, exc
            )
            await self._reply(message, NOT_TAKEN)
            return
        if not claimed:
            log.debug("duplicate event %s dropped", message.event_id)
            self.metrics.dedup_hit(message.chat.channel)
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
        elif message.text.strip() or message.attachments or message.action is not None:
            try:
                await self.conversations.enqueue(message)
            except QueueFull as exc:
                log.warning("%s", exc)
                await self.dedup.release(message.event_id)  # a resend later is a new message
                await self._reply(message, QUEUE_FULL)
            except TryLater:
                await self._unclaim(message.event_id)
                raise  # the channel has it delivered again

    def _for_the_queue(self, message: InboundMessage) -> bool:
        """What `_handle` queues once claimed: allowed, not a command it answers itself, not
        empty. (The access check is pure, so asking it before the claim changes nothing.)"""
        if message.command in ("help", "new", "stop"):
            return False
        if not (message.text.strip() or message.attachments or message.action is not None):
            return False
        return self.access.check(message) == "allow"

    async def _enqueue_new(self, queue: ClaimingQueue, message: InboundMessage) -> None:
        """Claim and queue in one step. TryLater: if the step ran after all, the redelivery is
        a duplicate, and it was queued; if not, nothing was claimed."""
        try:
            queued = await queue.enqueue_new(message)
        except QueueFull as exc:
            log.warning("%s", exc)
            await self._reply(message, QUEUE_FULL)
            return
        if not queued:
            log.debug("duplicate event %s dropped", message.event_id)
            self.metrics.dedup_hit(message.chat.channel)

    async def _unclaim(self, event_id: str) -> None:
        """The event was claimed but could not be queued (Redis went down in between): release
        the claim, so the redelivery the channel asks for is answered. Retried for a while: the
        same outage that refused the queue may refuse this too."""
        for delay in UNCLAIM_RETRIES_S:
            try:
                await self.dedup.release(event_id)
                return
            except TryLater:
                await asyncio.sleep(delay)
        log.error("event %s was claimed but not queued, and its claim not released", event_id)

    async def resume_turn(self, turn_id: str, control: TurnSignal | None = None) -> str:
        """Finish a turn whose process died (see bot/resume.py); its final status, or "not
        running". The caller holds the turn's conversation (its lease, or its queue slot) and
        may pass the `TurnSignal` that `/stop` reaches."""
        return await self.resumer.resume_turn(turn_id, control)

    async def queue_resume(self, turn_id: str, chat: ChatRef) -> None:
        """Resume a turn in its conversation's queue, ahead of what arrives after (embedded)."""
        # an empty user id: no message of a real user is coalesced into this one's batch
        await self.conversations.enqueue(InboundMessage(chat, "", "", RESUME_EVENT + turn_id))

    async def deliver_background(self, result: BackgroundResult) -> None:
        """A background specialist finished: its result becomes the coordinator's next turn.

        Where to answer comes from the store (the conversation's last turn), not from this
        process's memory, so the result lands whichever process saw the chat.
        """
        event_id = f"task:{result.task_id}"
        chat = await self.store.conversation_chat(result.conversation_key)
        if chat is None or not await self.dedup.claim(event_id):
            log.warning("background result %s not delivered (conversation gone)", result.task_id)
            return
        text = (
            f'<task-notification task_id="{result.task_id}" subagent_type="{result.subagent_type}" '
            f'status="{result.status}">\n'
            f"The specialist you dispatched in the background ({result.description}) finished. "
            f"Its result:\n{result.result_text()}\n</task-notification>\n"
            "This comes from the system, not the user: tell the user what it found, in your own words."
        )
        message = InboundMessage(chat, result.user_id, text, event_id, None, mentioned=True)
        await self.conversations.enqueue(message)

    async def _session(self, message: InboundMessage, agent_id: str, version: str) -> str:
        # Asked of the store every turn (one indexed read), never cached here: another process
        # may have run /new since.
        return await self.store.active_session(
            channel=message.chat.channel,
            conversation_key=message.conversation_key,
            user_id=message.user_id,
            agent_id=agent_id,
            persona_version=version,
        )

    async def _new(self, message: InboundMessage) -> None:
        await self.store.close_active_sessions(
            channel=message.chat.channel,
            conversation_key=message.conversation_key,
            user_id=message.user_id,
            agent_id=self.personas.get(
                self.settings.persona.for_channel(message.chat.channel)
            ).name,
        )
        await self._reply(message, "Started a new conversation. What can I do for you?")

    async def _stop(self, message: InboundMessage) -> None:
        """Stop the turn, the conversation's specialists and its queue, together."""
        killed = self.workers.stop_conversation(message.conversation_key) if self.workers else 0
        stopped = await self.conversations.stop(message.conversation_key)
        await self._tell_dropped(message, stopped)
        if stopped.running:  # its placeholder ends as STOPPED: that is the reply
            log.info("stopped %s (dropped %d queued)", message.conversation_key, stopped.dropped)
        elif killed or stopped.dropped:
            text = f"{STOPPED} ({killed} specialist(s), {stopped.dropped} queued)"
            await self._reply(message, text)
        else:
            await self._reply(message, "Nothing to stop.")

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

    async def _reply(self, message: InboundMessage, text: str) -> None:
        channel = self.channels[message.chat.channel]
        try:
            await channel.send(
                message.chat, OutboundContent(text), reply_to=message.message_id, final=True
            )
        except Exception:
            log.exception("could not reply in %s", message.chat.key)
