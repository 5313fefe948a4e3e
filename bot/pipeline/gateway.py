"""The gateway: every channel's inbox. The routing step, dedup, then a command or the conversation.

The routing step (bot/pipeline/routing.py: access policy, command table, then the conversation's mode)
says where a message goes. Messages for the model that arrive while a conversation's turn runs
wait in the queue (bot/pipeline/conversations.py) and are coalesced into its next turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace

from adapters.base import (
    Channel,
    ChatRef,
    InboundMessage,
    OutboundContent,
    QueueOverflow,
    TryLater,
)
from agent.coordinator import Coordinator
from agent.log_context import bound
from agent.personas import PersonaLibrary
from agent.workers import Workers
from bot.approvals.desk import ApprovalDesk
from bot.ops.metrics import NO_METRICS, GatewayMetrics
from bot.pipeline.chat_choice import ChatChoices
from bot.pipeline.commands import NewCommand, StopCommand
from bot.pipeline.conversation_sessions import ConversationSessions
from bot.pipeline.conversation_state import ConversationState, MemoryConversationState
from bot.pipeline.conversations import ClaimingQueue, ConversationQueue, Held, QueueFull, TurnSignal
from bot.pipeline.dedup import Dedup, release_retrying
from bot.pipeline.gateway_settings import GatewaySettings
from bot.pipeline.handoff_seam import HandoffSeam
from bot.pipeline.held import HeldMessages
from bot.pipeline.language import ConversationLanguage
from bot.pipeline.pairing import PairingGate
from bot.pipeline.quota import Quotas
from bot.pipeline.resume import TurnResumer
from bot.pipeline.routing import (
    CONVERSATION,
    IGNORE,
    Access,
    AccessPolicy,
    Command,
    CommandTable,
    DefaultAccess,
    ModeHandler,
    Route,
    Router,
)
from bot.pipeline.turn import RESUME_EVENT, TurnRunner
from bot.pipeline.turn_ends import TurnEnds
from bot.pipeline.turn_input import user_text_masker
from bot.pipeline.turn_work import TurnWork
from bot.pipeline.voice import Hearing
from bot.storage.base import StorageError
from bot.storage.roles import MessageRecords, TurnRecords
from content.blobs import BlobStore
from content.texts import DEFAULT_LANGUAGE, t

log = logging.getLogger(__name__)

__all__ = ["Access", "AccessPolicy", "DefaultAccess", "Gateway", "GatewaySettings"]

# in English (tests); said in the conversation's language (bot/pipeline/language.py)
REFUSAL = t(DEFAULT_LANGUAGE, "gateway.refused")
QUEUE_FULL = t(DEFAULT_LANGUAGE, "gateway.queue_full")
NOT_TAKEN = t(DEFAULT_LANGUAGE, "gateway.not_taken")


class Gateway:
    def __init__(
        self,
        *,
        channels: Mapping[str, Channel],
        coordinator: Coordinator,
        turn_log: TurnRecords,
        message_log: MessageRecords,
        personas: PersonaLibrary,
        dedup: Dedup,
        conversations: ConversationQueue,
        settings: GatewaySettings,
        access: AccessPolicy | None = None,
        workers: Workers | None = None,
        metrics: GatewayMetrics = NO_METRICS,
        quotas: Quotas | None = None,
        states: ConversationState | None = None,
        commands: Sequence[Command] = (),
        modes: Mapping[str, ModeHandler] | None = None,
        blobs: BlobStore | None = None,
        hearing: Hearing | None = None,
        pairing: PairingGate | None = None,
        approvals: ApprovalDesk | None = None,
        choices: ChatChoices | None = None,
        handoff: HandoffSeam | None = None,
    ) -> None:
        """`commands`: more rows of the command table (after /new and /stop; one of the same
        name replaces it). `modes`: the handlers of the modes other than bot (default: the
        message recorded and acknowledged, bot/pipeline/held.py). `turn_log` and
        `message_log`: the store's roles the gateway's parts use (its turns and sessions; the
        sessions' messages). `hearing`: voice notes transcribed before their turn (None: not).
        `approvals`: answers to approval requests, taken before routing (None: no requests).
        `pairing`: the gate for unknown senders' direct messages where the access policy says
        "pair" (None: they are refused). `choices`: each conversation's persona, model and
        budget (bot/pipeline/chat_choice.py; None: the channel's persona, the default model).
        `handoff`: operators' messages, and the turn's edges, for a handoff to a person."""
        self.approvals = approvals
        self.handoff = handoff
        self.channels = channels
        self.metrics = metrics
        self.coordinator = coordinator
        self.turn_log = turn_log
        self.personas = personas
        self.dedup = dedup
        self.conversations = conversations
        self.states = states or MemoryConversationState()
        # Redis: a plain message's event is claimed, and its conversation's mode read, by the
        # script that queues it
        self._claiming = (
            conversations
            if isinstance(conversations, ClaimingQueue)
            and conversations.claims_for(dedup)
            and conversations.holds_for(self.states)
            else None
        )
        self.settings = settings
        self.choices = choices
        self.access = access or DefaultAccess()
        self.pairing = pairing
        self.sessions = ConversationSessions(turn_log, personas, settings.persona, choices)
        self.languages = ConversationLanguage(
            self.states, default=settings.language, persona_language=self.sessions.persona_language
        )
        self.router = Router(
            self.access,
            CommandTable(
                (
                    NewCommand(turn_log, self.sessions.persona_name),
                    StopCommand(conversations, channels, workers),
                    *commands,
                )
            ),
        )
        held = HeldMessages(
            history=message_log,
            session_for=self.sessions.held_session,
            masker=lambda: user_text_masker(coordinator),
        )
        self.modes: Mapping[str, ModeHandler] = modes or {"waiting": held, "human": held}
        self.workers = workers
        work = TurnWork(coordinator, settings.turn_timeout_s)
        ends = TurnEnds(
            turn_log, message_log
        )  # an end the store refused is retried (bot/pipeline/turn_ends.py)
        self.resumer = TurnResumer(
            channels=channels,
            coordinator=coordinator,
            turn_log=turn_log,
            message_log=message_log,
            personas=personas,
            work=work,
            ends=ends,
            settings=settings.resume,
            blobs=blobs,
            languages=self.languages,
            approvals=approvals.records if approvals is not None else None,
            choices=choices,
        )
        self.turns = TurnRunner(
            channels=channels,
            coordinator=coordinator,
            turn_log=turn_log,
            personas=personas,
            dedup=dedup,
            session_for=self.sessions.session,
            persona=settings.persona,
            work=work,
            ends=ends,
            resumer=self.resumer,
            metrics=metrics,
            quotas=quotas,
            blobs=blobs,
            hearing=hearing,
            languages=self.languages,
            approvals=approvals,
            choices=choices,
        )
        # Cleared while interrupted turns are queued at start (bot/pipeline/recovery.py): a new message
        # waits, so it never runs before the unfinished turn of its conversation.
        self.accepting = asyncio.Event()
        self.accepting.set()

    async def run(self) -> None:
        """Run every conversation's turns until cancelled; the ends of turns the store refused
        to record are retried meanwhile, and once more after the last turn (bot/pipeline/turn_ends.py)."""
        try:
            async with asyncio.TaskGroup() as group:
                beside = [
                    group.create_task(self.turns.ends.retry(), name="turn ends"),
                    group.create_task(self.resumer.deferred.retry(self.queue_resume)),
                ]
                if self.approvals is not None:  # requests nobody answered in time: denied
                    beside.append(group.create_task(self.approvals.expire(self.queue_resume)))
                try:
                    await self.conversations.run(self._turn)
                finally:
                    for task in beside:
                        task.cancel()
        finally:
            await self.turns.ends.flush()

    async def _turn(self, batch: list[InboundMessage], control: TurnSignal) -> None:
        """A turn, between the handoff's edges: a batch a person holds now is held, not run;
        a transfer the model asked for switches once the final is out."""
        if self.handoff is None:
            await self.turns.run(batch, control)
            return
        run = await self.handoff.before_turn(batch, self._hold)
        if run:  # not only a `/human` switch, nor held
            await self.turns.run(run, control)
        await self.handoff.after_turn(batch)

    async def wait_idle(self) -> None:
        await self.conversations.wait_idle()

    def busy_here(self) -> bool:
        return self.conversations.busy_here()

    async def handle(self, message: InboundMessage) -> None:
        """The inbox every channel calls. Returns at once; the turn runs in its own task."""
        if not self.accepting.is_set():
            await self.accepting.wait()
        # its log lines (a duplicate, a refusal, /stop) name the conversation (JSON log)
        with bound(conversation_key=message.conversation_key, channel=message.chat.channel):
            await self._handle(message)

    async def _handle(self, message: InboundMessage) -> None:
        if self.handoff is not None and self.handoff.operates(message):
            if await self._claim(message):  # an operator's: never the model's
                await self.handoff.operate(message, self._reply)
            return
        if self.pairing is not None and self.pairing.operates(message):  # the operators' place
            if await self._claim(message):
                await self._paired(message, press=True)
            return
        route = self.router.route(message)  # reads nothing, so it can go before the claim
        if self.approvals is not None and self.approvals.may_be_answer(message):
            # an approval's button (any chat's, the operator place's too) or "allow"/"deny";
            # a text that answers nothing goes on as usual
            taken = await self._claim(message)
            if taken and not await self.approvals.take(message, self.queue_resume, self._say):
                await self._routed(route, message)
            return
        if route is CONVERSATION and self._claiming is not None:
            await self._enqueue_new(self._claiming, message)
            return
        if await self._claim(message):
            await self._routed(route, message)

    async def _routed(self, route: Route, message: InboundMessage) -> None:
        """A claimed message where its route sends it."""
        if route.to == "ignore":
            return
        if route.to == "pair":
            route = await self._paired(message)
            if route is IGNORE:
                return
        if route.command is not None:
            await route.command.run(await self._in_language(message), self._reply)
        elif route.to == "refuse":
            await self._say(message, "gateway.refused")
        else:
            await self._converse(message)

    async def _claim(self, message: InboundMessage) -> bool:
        try:
            claimed = await self.dedup.claim(message.event_id)
        except StorageError as exc:  # nothing is recorded: tell the user rather than drop it
            log.error(
                "event %s in %s not taken: storage: %s", message.event_id, message.chat.key, exc
            )
            await self._say(message, "gateway.not_taken")
            return False
        if not claimed:
            log.debug("duplicate event %s dropped", message.event_id)
            self.metrics.dedup_hit(message.chat.channel)
        return claimed

    async def _paired(self, message: InboundMessage, *, press: bool = False) -> Route:
        """An unknown sender's claimed direct message through the pairing gate, or an operator's
        press in its place: where the message goes next (IGNORE unless an approved sender's)."""
        if self.pairing is None:
            await self._say(message, "gateway.refused")
            return IGNORE
        try:
            if press:
                await self.pairing.press(message, self._reply)
            elif await self.pairing.admit(await self._in_language(message), self._reply):
                return self.router.allowed(message)
        except StorageError as exc:
            log.error("event %s in %s not paired: %s", message.event_id, message.chat.key, exc)
            await self.dedup.release(message.event_id)
            await self._say(message, "gateway.not_taken")
        return IGNORE

    async def _converse(self, message: InboundMessage) -> None:
        """The claimed message to its conversation: a turn, unless the mode says otherwise."""
        try:
            mode = await self.states.mode(message.conversation_key)
            if mode == "bot":
                await self.conversations.enqueue(message)
        except QueueFull as exc:
            await self.dedup.release(message.event_id)  # a resend later is a new message
            await self._overflow(message, exc)
        except StorageError as exc:
            log.error("event %s in %s not taken: %s", message.event_id, message.chat.key, exc)
            await self.dedup.release(message.event_id)
            await self._say(message, "gateway.not_taken")
        except TryLater:
            await release_retrying(self.dedup, message.event_id)
            raise  # the channel has it delivered again
        else:
            if mode != "bot":
                await self._hold(message, mode)

    async def _hold(self, message: InboundMessage, mode: str) -> None:
        """A message of a conversation not in bot mode (claimed already): its handler's. One
        that could not be recorded is released, so the platform's retry is taken."""
        handler = self.modes.get(mode)
        if handler is None:  # a mode a newer process set: held all the same, never the model's
            log.warning("no handler for mode %r of %s", mode, message.conversation_key)
            handler = self.modes.get("waiting") or next(iter(self.modes.values()))
        try:
            await handler.take(await self._in_language(message), mode, self._reply)
            if self.handoff is not None:
                await self.handoff.held(message)
        except StorageError as exc:
            log.error("event %s in %s not held: %s", message.event_id, message.chat.key, exc)
            await self.dedup.release(message.event_id)
            await self._say(message, "gateway.not_taken")
        except TryLater:
            await release_retrying(self.dedup, message.event_id)
            raise

    async def _enqueue_new(self, queue: ClaimingQueue, message: InboundMessage) -> None:
        """Claim and queue in one step. TryLater: if the step ran after all, the redelivery is
        a duplicate, and it was queued; if not, nothing was claimed."""
        try:
            queued = await queue.enqueue_new(message)
        except QueueFull as exc:
            await self._overflow(message, exc)
            return
        if isinstance(queued, Held):
            await self._hold(message, queued.mode)
        elif not queued:
            log.debug("duplicate event %s dropped", message.event_id)
            self.metrics.dedup_hit(message.chat.channel)

    async def _overflow(self, message: InboundMessage, exc: QueueFull) -> None:
        """The queue is full and `message` was not claimed: refused in the channel's own
        protocol where it has one (`QueueOverflow`), else with a notice replying to it."""
        log.warning("%s", exc)
        channel = self.channels.get(message.chat.channel)
        if channel is not None and channel.limits_for(message.chat).refuses_in_protocol:
            raise QueueOverflow(str(exc)) from exc
        await self._say(message, "gateway.queue_full")

    async def resume_turn(self, turn_id: str, control: TurnSignal | None = None) -> str:
        """Finish a turn whose process died (bot/pipeline/resume.py): its final status, or "not
        running". The caller holds its conversation; `control` is what `/stop` reaches."""
        return await self.resumer.resume_turn(turn_id, control)

    async def queue_resume(self, turn_id: str, chat: ChatRef, tag: str = "") -> None:
        """Resume a turn in its conversation's queue (`tag`: which approval it waited on)."""
        event = RESUME_EVENT + turn_id + (f"~{tag}" if tag else "")  # no user: coalesced alone
        await self.conversations.enqueue(InboundMessage(chat, "", "", event))

    async def _in_language(self, message: InboundMessage) -> InboundMessage:
        """The message as a command or a mode handler sees it: with its conversation's language."""
        return replace(message, language=await self.languages.of(message))

    async def _say(self, message: InboundMessage, key: str) -> None:
        """The gateway's text `key` in the chat, in the conversation's language."""
        await self._reply(message, t(await self.languages.of(message), key))

    async def _reply(self, message: InboundMessage, text: str) -> None:
        channel = self.channels[message.chat.channel]
        try:
            await channel.send(
                message.chat, OutboundContent(text), reply_to=message.message_id, final=True
            )
        except Exception:
            log.exception("could not reply in %s", message.chat.key)
