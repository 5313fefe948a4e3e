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
from collections.abc import Awaitable, Callable, Mapping

from adapters.base import Channel, ChannelError, InboundMessage
from agent.coordinator import Coordinator, TurnInput
from agent.log_context import bound
from agent.loop import Resumed
from agent.personas import PersonaLibrary
from agent.replay import ReplayPoint
from agent.types import Message
from bot.approvals.desk import ApprovalDesk
from bot.ops.metrics import NO_METRICS, GatewayMetrics
from bot.pipeline.attachments import fetch_files, tell_refusals, to_fetch
from bot.pipeline.chat_choice import ChatChoices, TurnChoice
from bot.pipeline.chat_notes import noted
from bot.pipeline.conversation_state import StateSnapshot
from bot.pipeline.conversations import TurnSignal
from bot.pipeline.dedup import Dedup
from bot.pipeline.delivery import Delivery
from bot.pipeline.language import ConversationLanguage
from bot.pipeline.persona_choice import PersonaChoice
from bot.pipeline.placeholder import post_placeholder
from bot.pipeline.quota import Quotas
from bot.pipeline.resume import TurnResumer
from bot.pipeline.turn_before import taken_over, withdraw_questions
from bot.pipeline.turn_ends import TurnEnds
from bot.pipeline.turn_input import carried, combine, media, shown, user_text_masker
from bot.pipeline.turn_line import log_turn, tallying
from bot.pipeline.turn_outcome import (
    INTERRUPTED,
    STOPPED,
    STORAGE_FAILED,
    TIMED_OUT,
    Outcome,
    storage_failed,
)
from bot.pipeline.turn_work import TurnWork
from bot.pipeline.voice import Heard, Hearing
from bot.storage.base import StorageError
from bot.storage.ids import time_ordered_id
from bot.storage.roles import TurnRecords
from bot.storage.turns import chat_record, handle_record
from content.blobs import BlobStore
from content.texts import DEFAULT_LANGUAGE, t
from tools.events import Interim
from tools.pii import PiiMasker

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

# + a turn id: the queued resumption of a turn interrupted by a crash; + `~<tag>` when one turn
# is resumed more than once (each approval it waited on), which Redis would else queue only once
RESUME_EVENT = "resume:"
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
        hearing: Hearing | None = None,
        languages: ConversationLanguage | None = None,
        approvals: ApprovalDesk | None = None,
        choices: ChatChoices | None = None,
    ) -> None:
        """`choices`: each conversation's persona, model and budget (None: the channel's
        persona and the default model, always). `work` runs the coordinator; `ends` records
        how turns ended (retrying what the store refused); `resumer` finishes the turns a dead process left (None: they are not);
        `hearing` transcribes voice notes (None: they stay audio parts, unheard); `languages`
        says which language the turn's own texts are in (None: English); `approvals`: the
        questions a new message withdraws (None: none are asked)."""
        self.approvals = approvals
        self.languages = languages
        self.channels = channels
        self.blobs = blobs  # where inbound files are fetched to; None: they stay labels
        self.hearing = hearing
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
        self.choices = choices

    async def run(self, batch: list[InboundMessage], control: TurnSignal) -> None:
        while batch and batch[0].event_id.startswith(RESUME_EVENT) and self.resumer is not None:
            # queued at start (bot/pipeline/recovery.py), before any new message of the conversation
            turn_id = batch[0].event_id.removeprefix(RESUME_EVENT).partition("~")[0]
            if await self.resumer.resume_turn(turn_id, control) == "running":
                self.resumer.deferred.add(turn_id, batch[0].chat)  # the store refused it
            else:
                self.resumer.deferred.done()
            batch = batch[1:]
        if not batch:
            return
        if self.approvals is not None and self.resumer is not None:
            await withdraw_questions(self.approvals, self.resumer, batch, control)
        last = batch[-1]
        turn_id = time_ordered_id()  # its index stays hot (bot/storage/ids.py)
        # every log line of the turn, its tools and specialists included, names it (JSON log);
        # fresh: a background result's turn runs in a task its specialist started
        with (
            bound(
                fresh=True,
                conversation_key=last.conversation_key,
                turn_id=turn_id,
                channel=last.chat.channel,
                persona=self.persona.for_channel(last.chat.channel),
            ),
            tallying(),
        ):
            await self._run(batch, control, turn_id)

    async def _run(self, batch: list[InboundMessage], control: TurnSignal, turn_id: str) -> None:
        last = batch[-1]
        channel = self.channels[last.chat.channel]
        if (
            control.resumed
            and self.resumer is not None
            and await taken_over(self.turn_log, self.resumer, batch, control)
        ):
            return
        language, state = DEFAULT_LANGUAGE, None  # the state as read for the language, reused
        if self.languages is not None:
            language, state = await self.languages.with_state(last)
        delivery = Delivery(
            channel,
            last.chat,
            reply_to=last.message_id,
            recipient=last.user_id,
            blobs=self.blobs,
            language=language,
            stopped=lambda: control.stopped,
        )
        arrived = min(message.received_at for message in batch)
        outcome = Outcome()
        recorded = False
        session_id: str | None = None
        kept: tuple[str, Message] | None = None  # an answer shown but not saved: saved later
        choice: TurnChoice | None = None
        log.debug("turn of %d message(s) starts", len(batch))
        try:
            if control.stopped:
                outcome = Outcome("stopped", t(language, "turn.stopped"))
            elif (refusal := await self._over_quota(last, language)) is not None:  # no model call
                log.info("over quota in %s: %s", last.conversation_key, refusal)
                outcome = Outcome("refused", refusal)
            else:
                # pinned for the whole turn, with the conversation's model
                choice = await self._choice(last, language, state)
                persona = self.personas.get(choice.persona)
                session_id = await self.session_for(last, persona.name, persona.version)
                masker = user_text_masker(self.coordinator)
                # Files to download and no voice notes among them: the placeholder goes up
                # before the download (a big file must not hold "Thinking…" back), so the
                # user's message, which carries the files, is recorded by the coordinator once
                # they are in (a process killed during the download leaves a turn with no user
                # message: the resumer apologises in its placeholder). Voice notes are heard
                # first: what they said is the placeholder's first text (bot/pipeline/voice.py).
                downloads = to_fetch(channel, self.blobs, batch) and not _spoken(batch)
                heard = None
                if not downloads:
                    heard = await self._inputs(channel, batch, masker, language)  # recorded next
                    batch = heard.batch
                    if heard.nothing_else:  # only voice notes, none heard: the reason is the reply
                        outcome = Outcome("refused", heard.reply)
            if outcome.status in ("stopped", "refused"):
                if not await post_placeholder(delivery, batch, self.dedup):
                    outcome.status = "undelivered"
                    return
                self.metrics.placeholder_shown(last.chat.channel, time.monotonic() - arrived)
            else:  # the persona, session and inputs above are set: nothing stopped the turn
                assert session_id is not None and choice is not None  # set with the persona
                text, parts = combine(batch, masker), media(batch)
                # with the user's message: a restart goes on from it (agent/replay.py)
                user = Message("user", text, parts=parts)
                start = None if downloads else ReplayPoint((user,), resumed=Resumed(rounds_done=0))
                # recorded BEFORE the placeholder is posted, and its handle right after: a
                # process killed in between leaves a turn another resumes, never an unknown one.
                # Where the gateway makes the id itself, the handle is recorded with the turn,
                # before the frame goes out: no window at all (a platform's id comes back only
                # once the message is shown: that window remains, as small as one write)
                reserved = delivery.reserve()
                await self.turn_log.create_turn(
                    turn_id=turn_id,
                    session_id=session_id,
                    channel=last.chat.channel,
                    conversation_key=last.conversation_key,
                    inbound_event_ids=[m.event_id for m in batch],
                    placeholder=handle_record(reserved) if reserved else chat_record(last.chat),
                    inbound_messages=shown(batch, masker),
                    messages=start.messages if start is not None else (),
                )
                recorded = True
                # what the voice notes said shows while the model works
                shows = None if heard is None else heard.placeholder(delivery.limits, language)
                if not await post_placeholder(delivery, batch, self.dedup, shows):
                    outcome = Outcome("undelivered", error="undelivered: no placeholder posted")
                    return
                if delivery.handles and reserved is None:
                    record = handle_record(delivery.handles[0])
                    await self.turn_log.update_turn_placeholder(turn_id, record)
                self.metrics.placeholder_shown(last.chat.channel, time.monotonic() - arrived)
                if downloads:
                    heard = await self._inputs(channel, batch, masker, language)
                    batch = heard.batch
                    text, parts = combine(batch, masker), media(batch)
                    if heard.lines:  # an audio file heard: shown as a voice note's would be
                        await delivery.on_event(
                            Interim(heard.placeholder(delivery.limits, language))
                        )
                turn = TurnInput(
                    persona=persona,
                    session_id=session_id,
                    turn_id=turn_id,
                    user_id=last.user_id,
                    channel=last.chat.channel,
                    conversation_key=last.conversation_key,
                    text=text,
                    parts=parts,
                    provider=choice.provider,
                    specialists=choice.specialists,
                )
                if heard is not None and heard.nothing_else:
                    outcome = Outcome("refused", heard.reply)
                else:
                    outcome = await self.work.run(turn, delivery, control, start)
                    # a background result's media, once: with the answer (not with a question)
                    if outcome.status not in ("stopped", "waiting"):
                        outcome.parts = carried(batch) + outcome.parts
            if control.lost:
                outcome, recorded = Outcome("lost"), False  # the new holder's now: hands off
                log.warning("turn %s left to the process that took it over", turn_id)
                return
            outcome.text = noted(outcome.status, outcome.text, choice, language)
            try:
                if outcome.status == "stopped":  # what it showed stays, marked stopped
                    await delivery.finish_stopped(outcome.text)
                else:
                    await delivery.finish(outcome.text, outcome.display, outcome.parts)
            except ChannelError as exc:
                log.error("turn %s ended but its final edit failed: %s", turn_id, exc)
                outcome.status, outcome.error = "failed", f"delivery: {exc}"
        except asyncio.CancelledError:
            outcome = Outcome(
                "failed", t(language, "turn.interrupted"), error="interrupted by shutdown"
            )
            if delivery.handles:
                try:
                    async with asyncio.timeout(SHUTDOWN_GRACE_S):
                        await delivery.finish(outcome.text)
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
                outcome = await storage_failed(batch, exc, self.dedup, language)
            try:
                await delivery.finish(outcome.text)
            except ChannelError as error:
                log.error("turn %s: could not say that storage failed: %s", turn_id, error)
        finally:
            await delivery.close()
            elapsed = time.monotonic() - arrived
            self.metrics.turn_finished(last.chat.channel, outcome.status, elapsed)
            log_turn(outcome=outcome.status, seconds=elapsed, user_id=last.user_id)
            if recorded:
                await self._record_end(turn_id, outcome, kept)
                await self._spend(last, turn_id)

    async def _inputs(
        self,
        channel: Channel,
        batch: list[InboundMessage],
        masker: PiiMasker | None,
        language: str,
    ) -> Heard:
        """The batch's files fetched into the blob store and its voice notes heard. A file
        refused, or a voice note not heard, is told to its sender in a reply of its own, unless
        the batch has nothing else: then that is the turn's whole answer."""
        fetched = await fetch_files(channel, self.blobs, batch, language)
        await tell_refusals(channel, fetched.refusals)
        if self.hearing is None:
            return Heard(fetched.batch)
        heard = await self.hearing.hear(fetched.batch, masker, language)
        if not heard.nothing_else:
            await tell_refusals(channel, heard.notes)
        return heard

    async def _record_end(
        self, turn_id: str, outcome: Outcome, kept: tuple[str, Message] | None = None
    ) -> None:
        done = outcome.status == "completed"
        final, parts = (outcome.text, outcome.parts) if done else (None, ())
        status = "failed" if outcome.status == "undelivered" else outcome.status
        # kept and retried if refused; `kept` is saved with it
        await self.ends.record(turn_id, status, final, outcome.error, kept, parts)

    async def _choice(
        self, message: InboundMessage, language: str, state: StateSnapshot | None
    ) -> TurnChoice:
        """The conversation's persona and model (bot/pipeline/chat_choice.py)."""
        if self.choices is None:
            return TurnChoice(self.persona.for_channel(message.chat.channel))
        return await self.choices.for_turn(message, language, state)

    async def _over_quota(self, message: InboundMessage, language: str) -> str | None:
        """What the placeholder says instead of an answer, if a quota is reached; else None and
        the turn is counted."""
        return None if self.quotas is None else await self.quotas.admit(message, language)

    async def _spend(self, message: InboundMessage, turn_id: str) -> None:
        """The turn's tokens (its specialists' so far included) count against its quotas."""
        if self.quotas is None or not self.quotas.counts_tokens:
            return
        try:
            used = await self.turn_log.turn_usage(turn_id)
            await self.quotas.spend(message, used.input_tokens + used.output_tokens)
        except StorageError as exc:
            log.error("turn %s: its tokens were not counted against quotas: %s", turn_id, exc)


def _spoken(batch: list[InboundMessage]) -> bool:
    """Whether the batch brings a voice note to hear (a Telegram voice or audio, a Slack clip)."""
    return any(attachment.spoken for message in batch for attachment in message.attachments)
