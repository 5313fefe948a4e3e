"""One turn: placeholder first, then the coordinator, then exactly one final edit, whatever happens.

`/stop` cancels only the model work (`TurnSignal.work`), never the delivery, so a stopped turn
still ends with its placeholder saying so; a shutdown tells the user too, briefly. A storage
failure ends the turn with a note asking the user to send the message again, and a placeholder
whose send went unconfirmed is not the end: the answer then comes as one new message.

Beside it: the outcomes and their notes (`bot/pipeline/turn_outcome.py`), the coordinator's part within
its deadline (`bot/pipeline/turn_work.py`), the placeholder's posting (`bot/pipeline/placeholder.py`), the batch
as the model and the transcript see it (`bot/pipeline/turn_input.py`), and the recorded ends a store
refused (`bot/pipeline/turn_ends.py`).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping

from adapters.base import Channel, ChannelError, InboundMessage
from agent.coordinator import Coordinator, TurnInput
from agent.log_context import bound
from agent.loop import Resumed
from agent.personas import PersonaLibrary
from agent.replay import ReplayPoint
from agent.types import Message
from bot.ops.metrics import NO_METRICS, GatewayMetrics
from bot.pipeline.attachments import fetch_files, tell_refusals
from bot.pipeline.conversations import TurnSignal
from bot.pipeline.dedup import Dedup
from bot.pipeline.delivery import Delivery
from bot.pipeline.persona_choice import PersonaChoice
from bot.pipeline.placeholder import post_placeholder
from bot.pipeline.quota import Quotas
from bot.pipeline.resume import TurnResumer
from bot.pipeline.turn_ends import TurnEnds
from bot.pipeline.turn_input import combine, media, shown, user_text_masker
from bot.pipeline.turn_outcome import (
    INTERRUPTED,
    STOPPED,
    STORAGE_FAILED,
    TIMED_OUT,
    Outcome,
    storage_failed,
)
from bot.pipeline.turn_work import TurnWork
from bot.storage.base import StorageError
from bot.storage.roles import TurnRecords
from bot.storage.turns import chat_record, handle_record
from content.blobs import BlobStore

log = logging.getLogger(__name__)

# the names the gateway, the resumer and the tests import from here
__all__ = [
    "INTERRUPTED",
    "RESUME_EVENT",
    "STOPPED",
    "STORAGE_FAILED",
    "TIMED_OUT",
    "Outcome",
    "SessionFor",
    "TurnRunner",
]

RESUME_EVENT = "resume:"  # + a turn id: the queued resumption of a turn interrupted by a crash
SHUTDOWN_GRACE_S = 3.0

SessionFor = Callable[[InboundMessage, str, str], Awaitable[str]]


class TurnRunner:
    def __init__(
        self,
        *,
        channels: Mapping[str, Channel],
        coordinator: Coordinator,
        turn_log: TurnRecords,
        personas: PersonaLibrary,
        dedup: Dedup,
        session_for: SessionFor,
        persona: PersonaChoice,
        work: TurnWork,
        ends: TurnEnds,
        resumer: TurnResumer | None = None,
        metrics: GatewayMetrics = NO_METRICS,
        quotas: Quotas | None = None,
        blobs: BlobStore | None = None,
    ) -> None:
        """`work` runs the coordinator; `ends` records how turns ended (retrying what the store
        refused); `resumer` finishes the turns a dead process left (None: they are not)."""
        self.channels = channels
        self.blobs = blobs  # where inbound files are fetched to; None: they stay labels
        self.metrics = metrics
        self.coordinator = coordinator
        self.turn_log = turn_log
        self.personas = personas
        self.dedup = dedup
        self.session_for = session_for
        self.persona = persona
        self.work = work
        self.quotas = quotas
        self.resumer = resumer
        self.ends = ends

    async def run(self, batch: list[InboundMessage], control: TurnSignal) -> None:
        while batch and batch[0].event_id.startswith(RESUME_EVENT) and self.resumer is not None:
            # queued at start (bot/pipeline/recovery.py), before any new message of the conversation
            turn_id = batch[0].event_id.removeprefix(RESUME_EVENT)
            if await self.resumer.resume_turn(turn_id, control) == "running":
                self.resumer.deferred.add(turn_id, batch[0].chat)  # the store refused it
            else:
                self.resumer.deferred.done()
            batch = batch[1:]
        if not batch:
            return
        last = batch[-1]
        turn_id = uuid.uuid4().hex
        # every log line of the turn, its tools and specialists included, names it (JSON log);
        # fresh: a background result's turn runs in a task its specialist started
        with bound(
            fresh=True,
            conversation_key=last.conversation_key,
            turn_id=turn_id,
            channel=last.chat.channel,
            persona=self.persona.for_channel(last.chat.channel),
        ):
            await self._run(batch, control, turn_id)

    async def _run(self, batch: list[InboundMessage], control: TurnSignal, turn_id: str) -> None:
        last = batch[-1]
        channel = self.channels[last.chat.channel]
        if control.resumed and self.resumer is not None and await self._taken_over(batch, control):
            return
        delivery = Delivery(
            channel,
            last.chat,
            reply_to=last.message_id,
            recipient=last.user_id,
            blobs=self.blobs,
        )
        arrived = min(message.received_at for message in batch)
        outcome = Outcome()
        recorded = False
        session_id: str | None = None
        kept: tuple[str, Message] | None = None  # an answer shown but not saved: saved later
        log.debug("turn of %d message(s) starts", len(batch))
        try:
            if control.stopped:
                outcome = Outcome("stopped", STOPPED)
            elif (refusal := await self._over_quota(last)) is not None:  # no model call
                log.info("over quota in %s: %s", last.conversation_key, refusal)
                outcome = Outcome("refused", refusal)
            if outcome.status in ("stopped", "refused"):
                if not await post_placeholder(delivery, batch, self.dedup):
                    outcome.status = "undelivered"
                    return
                self.metrics.placeholder_shown(last.chat.channel, time.monotonic() - arrived)
            else:
                # pinned for the whole turn
                persona = self.personas.get(self.persona.for_channel(last.chat.channel))
                session_id = await self.session_for(last, persona.name, persona.version)
                masker = user_text_masker(self.coordinator)
                fetched = await fetch_files(channel, self.blobs, batch)  # before it is recorded
                batch = fetched.batch
                await tell_refusals(channel, fetched.refusals)
                # recorded BEFORE the placeholder is posted, and its handle right after: a
                # process killed in between leaves a turn another resumes, never an unknown one.
                # Where the gateway makes the id itself, the handle is recorded with the turn,
                # before the frame goes out: no window at all (a platform's id comes back only
                # once the message is shown: that window remains, as small as one write)
                reserved = delivery.reserve()
                text, parts = combine(batch, masker), media(batch)
                # with the user's message: a restart goes on from it (agent/replay.py)
                user = Message("user", text, parts=parts)
                start = ReplayPoint((user,), resumed=Resumed(rounds_done=0))
                await self.turn_log.create_turn(
                    turn_id=turn_id,
                    session_id=session_id,
                    channel=last.chat.channel,
                    conversation_key=last.conversation_key,
                    inbound_event_ids=[m.event_id for m in batch],
                    placeholder=handle_record(reserved) if reserved else chat_record(last.chat),
                    inbound_messages=shown(batch, masker),
                    messages=start.messages,
                )
                recorded = True
                if not await post_placeholder(delivery, batch, self.dedup):
                    outcome = Outcome("undelivered", error="undelivered: no placeholder posted")
                    return
                if delivery.handles and reserved is None:
                    record = handle_record(delivery.handles[0])
                    await self.turn_log.update_turn_placeholder(turn_id, record)
                self.metrics.placeholder_shown(last.chat.channel, time.monotonic() - arrived)
                turn = TurnInput(
                    persona=persona,
                    session_id=session_id,
                    turn_id=turn_id,
                    user_id=last.user_id,
                    channel=last.chat.channel,
                    conversation_key=last.conversation_key,
                    text=text,
                    parts=parts,
                )
                outcome = await self.work.run(turn, delivery, control, start)
            if control.lost:
                outcome, recorded = Outcome("lost"), False  # the new holder's now: hands off
                log.warning("turn %s left to the process that took it over", turn_id)
                return
            try:
                await delivery.finish(outcome.text, outcome.display, outcome.parts)
            except ChannelError as exc:
                log.error("turn %s ended but its final edit failed: %s", turn_id, exc)
                outcome.status, outcome.error = "failed", f"delivery: {exc}"
        except asyncio.CancelledError:
            outcome = Outcome("failed", INTERRUPTED, error="interrupted by shutdown")
            if delivery.handles:
                try:
                    async with asyncio.timeout(SHUTDOWN_GRACE_S):
                        await delivery.finish(INTERRUPTED)
                except (TimeoutError, ChannelError):
                    pass
            raise
        except StorageError as exc:
            seen = delivery.answer_shown()
            if seen is not None and session_id is not None:  # never take back an answer
                log.error(
                    "turn %s: storage failed after the user saw the answer (%s); the answer "
                    "stays, and its save is retried",
                    turn_id,
                    exc,
                )
                outcome = Outcome("completed", seen, error=f"answer saved late: storage: {exc}")
                kept = (session_id, Message("assistant", seen))
            else:
                outcome = await storage_failed(batch, exc, self.dedup)
            try:
                await delivery.finish(outcome.text)
            except ChannelError as error:
                log.error("turn %s: could not say that storage failed: %s", turn_id, error)
        finally:
            await delivery.close()
            elapsed = time.monotonic() - arrived
            self.metrics.turn_finished(last.chat.channel, outcome.status, elapsed)
            log.debug("turn %s in %.1f ms", outcome.status, elapsed * 1000)
            if recorded:
                await self._record_end(turn_id, outcome, kept)
                await self._spend(last, turn_id)

    async def _taken_over(self, batch: list[InboundMessage], control: TurnSignal) -> bool:
        """A batch taken over from a process that died running it (several processes): if a
        turn took these events, finish that one in its placeholder (never a second one), or, if
        it ended before its process died, leave it be: nothing is answered twice. False: no
        turn was recorded, so the batch is run as new."""
        assert self.resumer is not None
        last = batch[-1]
        turn = await self.turn_log.turn_for_events(
            last.conversation_key, [m.event_id for m in batch]
        )
        if turn is None:
            return False
        if turn.status == "running":
            await self.resumer.resume_turn(str(turn.id), control)
        else:
            log.info("turn %s had ended (%s) before its process died", turn.id, turn.status)
        return True

    async def _record_end(
        self, turn_id: str, outcome: Outcome, kept: tuple[str, Message] | None = None
    ) -> None:
        final = outcome.text if outcome.status == "completed" else None
        status = "failed" if outcome.status == "undelivered" else outcome.status
        # kept and retried if refused; `kept` is saved with it
        await self.ends.record(turn_id, status, final, outcome.error, kept)

    async def _over_quota(self, message: InboundMessage) -> str | None:
        """What the placeholder says instead of an answer, if a quota is reached; else None and
        the turn is counted."""
        return None if self.quotas is None else await self.quotas.admit(message)

    async def _spend(self, message: InboundMessage, turn_id: str) -> None:
        """The turn's tokens (its specialists' so far included) count against its quotas."""
        if self.quotas is None or not self.quotas.counts_tokens:
            return
        try:
            used = await self.turn_log.turn_usage(turn_id)
            await self.quotas.spend(message, used.input_tokens + used.output_tokens)
        except StorageError as exc:
            log.error("turn %s: its tokens were not counted against quotas: %s", turn_id, exc)
