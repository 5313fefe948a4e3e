"""A turn whose process died is finished, not lost: resumed into the same placeholder, or ended
there with a short apology when it cannot go on safely.

`TurnResumer.resume_turn(turn_id)` is the one entry point: at start in embedded mode (queued on
the turn's conversation by bot/pipeline/recovery.py), or by whichever process takes over the turn when
another process's lease on it expires. It reloads what the turn recorded (its user message,
each model step, each tool result: see agent/replay.py), replays the recorded tool results
instead of calling those tools again, lets the model go on, and edits the same placeholder into
the one answer. The inbound events stay claimed, so a platform's redelivery is not answered.

It gives up, with `GAVE_UP` in the placeholder, when the turn is older than `max_age_s`, has
been taken up `max_attempts` times already (a turn that crashes the process each time must not
crash-loop it), its persona or channel is gone, or a call that is not idempotent had started
and left no result (it may have happened once; it must not happen twice).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from adapters.base import (
    Channel,
    ChannelError,
    ChatRef,
    MessageHandle,
    NamesItsMessages,
    OutboundContent,
)
from agent.coordinator import NOT_FINISHED, Coordinator, TurnInput
from agent.loop import tool_message
from agent.personas import Persona, PersonaLibrary
from agent.replay import ReplayPoint, Unresumable, open_calls, replay_point
from agent.types import Message
from bot.pipeline.chat_choice import ChatChoices
from bot.pipeline.conversations import TurnSignal
from bot.pipeline.delivery import Delivery
from bot.pipeline.language import ConversationLanguage
from bot.pipeline.resume_later import Deferred
from bot.pipeline.turn_ends import TurnEnds, ended_unrecorded
from bot.pipeline.turn_input import TASK_EVENT
from bot.pipeline.turn_outcome import Outcome
from bot.pipeline.turn_work import TurnWork
from bot.storage.base import StorageError
from bot.storage.roles import ApprovalRecords, MessageRecords, TurnRecords
from bot.storage.rows import ResumedTurn
from bot.storage.turns import chat_from_record, handle_from_record, handle_record
from content.blobs import BlobStore
from content.texts import DEFAULT_LANGUAGE, t
from tools.base import ToolResult

log = logging.getLogger(__name__)

GAVE_UP = t(DEFAULT_LANGUAGE, "turn.gave_up")  # in English; a turn's own: its conversation's
EDIT_DEADLINE_S = 15.0  # a platform that does not answer must not hold the conversation


@dataclass(frozen=True, slots=True)
class ResumeSettings:
    max_age_s: float = 900.0
    max_attempts: int = 2


class TurnResumer:
    def __init__(
        self,
        *,
        channels: Mapping[str, Channel],
        coordinator: Coordinator,
        turn_log: TurnRecords,
        message_log: MessageRecords,
        personas: PersonaLibrary,
        work: TurnWork,
        ends: TurnEnds,
        settings: ResumeSettings,
        blobs: BlobStore | None = None,
        languages: ConversationLanguage | None = None,
        approvals: ApprovalRecords | None = None,
        choices: ChatChoices | None = None,
    ) -> None:
        """`languages`: which language a conversation's texts are in (None: English);
        `approvals`: where the calls a turn waited on are asked about (None: none are);
        `choices`: the conversation's chosen model (None: the default answers)."""
        self.approvals = approvals
        self.languages = languages
        self.choices = choices
        self.channels = channels
        self.blobs = blobs  # where the parts a resumed answer sends are read
        self.coordinator = coordinator
        self.turn_log = turn_log
        self.message_log = message_log
        self.personas = personas
        self.work = work
        self.ends = ends
        self.settings = settings
        # turns whose resumption the store refused (a full disk at start): tried again
        self.deferred = Deferred()

    async def resume_turn(self, turn_id: str, control: TurnSignal | None = None) -> str:
        """Finish turn `turn_id` if it is still `running`; its final status, or "not running".

        The caller holds the conversation (its queue slot or its lease): no other turn of the
        conversation runs meanwhile. `control` lets `/stop` reach the resumed model work.
        """
        turns, messages = self.turn_log, self.message_log
        try:
            turn = await turns.begin_resume(turn_id)
        except StorageError as exc:
            log.error("turn %s cannot be resumed now (storage: %s); tried again", turn_id, exc)
            return "running"
        if turn is None:
            return "not running"
        record = turn.placeholder
        handle = handle_from_record(record) if record else None
        chat = chat_from_record(record) if record else None
        channel = self.channels.get(turn.channel)
        own: list[Message] = []
        point: ReplayPoint | None = None
        try:
            rows = await messages.load_history(turn.session_id)
            own = [message for owner, message in rows if owner == turn_id]
            persona, reason = self._persona(turn, channel, chat)
            if reason is None and await ended_unrecorded(turns, turn):
                persona, reason = None, "it had ended: a later turn of its conversation ran"
            if persona is not None:
                calls = await turns.turn_tool_calls(turn_id, turn.session_id)
                allowed = self.coordinator.prepare(persona).allowed
                try:
                    audit = [asdict(call) for call in calls]
                    gated = await self._gated(turn_id, own)
                    point = replay_point(own, audit, self.coordinator.registry, allowed, gated)
                except Unresumable as exc:
                    reason = str(exc)
        except StorageError as exc:
            log.error("turn %s cannot be resumed now (storage: %s); tried again", turn_id, exc)
            return "running"
        if reason is not None or point is None or persona is None:
            await self._give_up(turn, channel, chat, handle, own, reason or "nothing to resume")
            return "failed"
        assert channel is not None and chat is not None  # else `_persona` gave a reason
        log.info(
            "resuming turn %s in %s (attempt %d)",
            turn_id,
            turn.conversation_key,
            turn.resume_attempts,
        )
        signal = control or TurnSignal()
        return await self._finish(turn, persona, channel, chat, handle, point, signal)

    async def _gated(self, turn_id: str, own: list[Message]) -> set[str]:
        """The open calls that waited for approval and whose approval was not used: they never
        ran, so they go back to the gate (agent/replay.py)."""
        if self.approvals is None:
            return set()
        gated = set()
        for call in open_calls(own):
            asked = await self.approvals.approval_for_call(turn_id, call.id)
            if asked is not None and asked.status != "used":
                gated.add(call.id)
        return gated

    def _persona(
        self, turn: ResumedTurn, channel: Channel | None, chat: ChatRef | None
    ) -> tuple[Persona | None, str | None]:
        """The turn's persona, or why the turn cannot go on (before anything is read)."""
        if turn.resume_attempts > self.settings.max_attempts:
            return None, f"taken up {turn.resume_attempts - 1} times already"
        started = datetime.fromisoformat(turn.created_at)
        age = (datetime.now(UTC) - started).total_seconds()
        # attempts 0: it waited for a person's approval, and no crash cut it: however long the
        # person took, it goes on (the approval's own timeout bounds the wait)
        if age > self.settings.max_age_s and turn.resume_attempts > 0:
            return (
                None,
                f"too old ({age:.0f} s; agent.resume_max_age_s is {self.settings.max_age_s:g})",
            )
        if channel is None:
            return None, f"channel {turn.channel!r} is not running here"
        if chat is None:
            return None, "no placeholder was recorded"
        try:
            return self.personas.get(turn.agent_id), None
        except KeyError as exc:
            return None, f"persona gone: {exc}"

    async def _finish(
        self,
        turn: ResumedTurn,
        persona: Persona,
        channel: Channel,
        chat: ChatRef,
        handle: MessageHandle | None,
        point: ReplayPoint,
        control: TurnSignal,
    ) -> str:
        language = await self._language(turn)
        delivery = Delivery(
            channel,
            chat,
            recipient=turn.user_id,
            blobs=self.blobs,
            language=language,
            stopped=lambda: control.stopped,
        )
        # a background result's media (the user message's parts) ride with its answer, as in
        # a turn that was not cut (bot/pipeline/turn_input.py `carried`)
        events = turn.inbound_event_ids
        task = bool(events) and all(event.startswith(TASK_EVENT) for event in events)
        carried = point.messages[0].parts if task and point.messages else ()
        outcome = Outcome(
            "completed", point.final or "", point.display, parts=carried + point.parts
        )
        kept: tuple[str, Message] | None = None
        try:
            if handle is not None:
                await _announce(channel, handle, language)
                delivery.adopt(handle)
            else:  # its process died before it learned the placeholder's id: a new one
                await self._new_placeholder(turn.id, delivery)
            if point.final is None:
                provider = None
                if self.choices is not None:
                    key = turn.conversation_key
                    provider = await self.choices.chosen_provider(key, turn.channel)
                work = TurnInput(
                    persona=persona,
                    session_id=turn.session_id,
                    turn_id=turn.id,
                    user_id=turn.user_id,
                    channel=turn.channel,
                    conversation_key=turn.conversation_key,
                    text=point.messages[0].content,
                    parts=point.messages[0].parts,
                    provider=provider,
                )
                outcome = await self.work.run(work, delivery, control, point)
                if outcome.status not in ("stopped", "waiting"):
                    outcome.parts = carried + outcome.parts
            if control.lost:  # another process took it over meanwhile: leave it to that one
                log.warning("turn %s left to the process that took it over", turn.id)
                return "lost"
            if outcome.status == "stopped":  # what it showed stays, marked stopped
                await delivery.finish_stopped(outcome.text)
            else:
                await delivery.finish(outcome.text, outcome.display, outcome.parts)
        except ChannelError as exc:
            log.error("turn %s resumed but its final edit failed: %s", turn.id, exc)
            outcome.status, outcome.error = "failed", f"delivery: {exc}"
        except StorageError as exc:
            shown = delivery.answer_shown()  # the user saw the answer: it is not taken back
            if shown is not None:
                log.error("turn %s: its answer was shown, then not saved (%s)", turn.id, exc)
                outcome = Outcome("completed", shown, error=f"answer saved late: storage: {exc}")
                kept = (turn.session_id, Message("assistant", shown))
            else:
                outcome = Outcome(
                    "failed", t(language, "turn.storage_failed"), error=f"storage: {exc}"
                )
            await _say(delivery, outcome.text)
        except asyncio.CancelledError:
            sorry = t(language, "turn.interrupted")
            outcome = Outcome("failed", sorry, error="interrupted by shutdown")
            await _say(delivery, sorry)
            raise
        finally:
            await delivery.close()
            if not control.lost:
                done = outcome.status == "completed"
                final, parts = (outcome.text, outcome.parts) if done else (None, ())
                await self.ends.record(turn.id, outcome.status, final, outcome.error, kept, parts)
        return outcome.status

    async def _new_placeholder(self, turn_id: str, delivery: Delivery) -> None:
        """Post a placeholder and record it, as a new turn does (a send of unknown fate
        leaves none: the answer then comes as a new message)."""
        try:
            async with asyncio.timeout(EDIT_DEADLINE_S):
                handle = await delivery.start()
        except (ChannelError, TimeoutError) as exc:
            log.warning("turn %s: no new placeholder (%s); the answer comes alone", turn_id, exc)
            return
        if handle is not None:
            await self.turn_log.update_turn_placeholder(turn_id, handle_record(handle))

    async def _give_up(
        self,
        turn: ResumedTurn,
        channel: Channel | None,
        chat: ChatRef | None,
        handle: MessageHandle | None,
        own: list[Message],
        reason: str,
    ) -> None:
        """The apology in the placeholder; the turn's open calls closed, so the history stays
        valid for the model; the turn `failed` with the reason."""
        outcome = "no placeholder to edit"
        if channel is not None and chat is not None:
            gave_up = OutboundContent(t(await self._language(turn), "turn.gave_up"))
            try:
                async with asyncio.timeout(EDIT_DEADLINE_S):
                    if handle is not None:
                        await _announce(channel, handle, await self._language(turn))
                        await channel.edit(handle, gave_up, final=True)
                        outcome = "placeholder edited"
                    else:  # none was posted, or its id never learned: say it anew
                        await channel.send(chat, gave_up, final=True, recipient=turn.user_id)
                        outcome = "said in a new message"
            except (ChannelError, TimeoutError) as exc:
                outcome = f"apology not delivered: {exc}"
        try:
            closing = [
                tool_message(call, ToolResult(NOT_FINISHED, ok=False)) for call in open_calls(own)
            ]
            if closing:
                await self.message_log.append_messages(turn.session_id, turn.id, closing)
            await self.turn_log.finish_turn(
                turn.id, status="failed", error=f"not resumed: {reason}"
            )
        except StorageError as exc:
            log.error("turn %s given up but not recorded: %s", turn.id, exc)
        log.warning("turn %s was interrupted and is not resumed (%s): %s", turn.id, reason, outcome)

    async def _language(self, turn: ResumedTurn) -> str:
        if self.languages is None:
            return DEFAULT_LANGUAGE
        return await self.languages.of_conversation(turn.conversation_key, turn.channel)


async def _announce(channel: Channel, handle: MessageHandle, language: str) -> None:
    """A placeholder whose id the gateway made was recorded before it went out: the dead
    process may have died in between, so it is posted again (the same message either way)."""
    if isinstance(channel, NamesItsMessages):
        await channel.post(handle, OutboundContent(t(language, "turn.placeholder")))


async def _say(delivery: Delivery, text: str) -> None:
    try:
        async with asyncio.timeout(3.0):
            await delivery.finish(text)
    except (TimeoutError, ChannelError):
        pass
