"""One turn: placeholder first, then the coordinator, then exactly one final edit, whatever happens.

`/stop` cancels only the model work (`TurnSignal.work`), never the delivery, so a stopped turn
still ends with its placeholder saying so; a shutdown tells the user too, briefly. A storage
failure ends the turn with a note asking the user to send the message again, and a placeholder
whose send went unconfirmed is not the end: the answer then comes as one new message.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from adapters.base import Channel, ChannelError, DeliveryUncertain, InboundMessage, RateLimited
from agent.coordinator import Coordinator, TurnInput
from agent.log_context import bound
from agent.loop import Resumed
from agent.personas import PersonaLibrary
from agent.providers.base import ProviderError
from agent.replay import ReplayPoint
from agent.types import Message
from bot.conversations import TurnSignal
from bot.dedup import Dedup
from bot.delivery import APOLOGY, Delivery
from bot.metrics import NO_METRICS, GatewayMetrics
from bot.quota import Quotas
from bot.storage.base import GatewayStore, StorageError
from bot.storage.turns import chat_record, handle_record
from bot.turn_ends import TurnEnds
from tools.builtin.settings import ToolsSettings
from tools.pii import PiiMasker
from tools.redact import redact_credentials

if TYPE_CHECKING:
    from bot.resume import TurnResumer

log = logging.getLogger(__name__)

STOPPED = "⏹ Stopped."
TIMED_OUT = (
    "Sorry — this took too long, so I stopped. Please try again, perhaps with a smaller request."
)
INTERRUPTED = (
    "Sorry — the bot restarted before finishing this answer. Please send your message again."
)
STORAGE_FAILED = (
    "Sorry — I couldn't save this conversation just now, so I stopped. "
    "Please send your message again in a minute."
)
RESUME_EVENT = "resume:"  # + a turn id: the queued resumption of a turn interrupted by a crash
PLACEHOLDER_ATTEMPTS = 3
SHUTDOWN_GRACE_S = 3.0

SessionFor = Callable[[InboundMessage, str, str], Awaitable[str]]


@dataclass(slots=True)
class Outcome:
    status: str = "failed"
    text: str = APOLOGY
    display: tuple[Mapping[str, Any], ...] = ()
    error: str | None = None


class TurnRunner:
    def __init__(
        self,
        *,
        channels: Mapping[str, Channel],
        coordinator: Coordinator,
        store: GatewayStore,
        personas: PersonaLibrary,
        dedup: Dedup,
        session_for: SessionFor,
        persona: str,
        timeout_s: float,
        metrics: GatewayMetrics = NO_METRICS,
        quotas: Quotas | None = None,
    ) -> None:
        self.channels = channels
        self.metrics = metrics
        self.coordinator = coordinator
        self.store = store
        self.personas = personas
        self.dedup = dedup
        self.session_for = session_for
        self.persona = persona
        self.timeout_s = timeout_s
        self.quotas = quotas
        self.resumer: TurnResumer | None = None  # set by the gateway
        self.ends = TurnEnds(store)  # an end the store refused is retried (bot/turn_ends.py)

    async def run(self, batch: list[InboundMessage], control: TurnSignal) -> None:
        while batch and batch[0].event_id.startswith(RESUME_EVENT) and self.resumer is not None:
            # queued at start (bot/recovery.py), before any new message of the conversation
            await self.resumer.resume_turn(batch[0].event_id.removeprefix(RESUME_EVENT), control)
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
            persona=self.persona,
        ):
            await self._run(batch, control, turn_id)

    async def _run(self, batch: list[InboundMessage], control: TurnSignal, turn_id: str) -> None:
        last = batch[-1]
        channel = self.channels[last.chat.channel]
        if control.resumed and self.resumer is not None and await self._taken_over(batch, control):
            return
        delivery = Delivery(channel, last.chat, reply_to=last.message_id, recipient=last.user_id)
        arrived = min(message.received_at for message in batch)
        outcome = Outcome()
        recorded = False
        log.debug("turn of %d message(s) starts", len(batch))
        try:
            if control.stopped:
                outcome = Outcome("stopped", STOPPED)
            elif (refusal := await self._over_quota(last)) is not None:  # no model call
                log.info("over quota in %s: %s", last.conversation_key, refusal)
                outcome = Outcome("refused", refusal)
            if outcome.status in ("stopped", "refused"):
                if not await self._post_placeholder(delivery, batch):
                    outcome.status = "undelivered"
                    return
                self.metrics.placeholder_shown(last.chat.channel, time.monotonic() - arrived)
            else:
                persona = self.personas.get(self.persona)  # pinned for the whole turn
                session_id = await self.session_for(last, persona.name, persona.version)
                masker = _user_text_masker(self.coordinator)
                # recorded BEFORE the placeholder is posted, and its handle right after: a
                # process killed in between leaves a turn another resumes, never an unknown one
                await self.store.create_turn(
                    turn_id=turn_id,
                    session_id=session_id,
                    channel=last.chat.channel,
                    conversation_key=last.conversation_key,
                    inbound_event_ids=[m.event_id for m in batch],
                    placeholder=chat_record(last.chat),
                    inbound_messages=_shown(batch, masker),
                )
                recorded = True
                text = _combine(batch, masker)
                # the user's message too: a restart goes on from it (agent/replay.py)
                start = ReplayPoint((Message("user", text),), resumed=Resumed(rounds_done=0))
                await self.store.append_messages(session_id, turn_id, list(start.messages))
                if not await self._post_placeholder(delivery, batch):
                    outcome = Outcome("undelivered", error="undelivered: no placeholder posted")
                    return
                if delivery.handles:
                    record = handle_record(delivery.handles[0])
                    await self.store.update_turn_placeholder(turn_id, record)
                self.metrics.placeholder_shown(last.chat.channel, time.monotonic() - arrived)
                turn = TurnInput(
                    persona=persona,
                    session_id=session_id,
                    turn_id=turn_id,
                    user_id=last.user_id,
                    channel=last.chat.channel,
                    conversation_key=last.conversation_key,
                    text=text,
                )
                outcome = await self.work(turn, delivery, control, start)
            if control.lost:
                outcome, recorded = Outcome("lost"), False  # the new holder's now: hands off
                log.warning("turn %s left to the process that took it over", turn_id)
                return
            try:
                await delivery.finish(outcome.text, outcome.display)
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
            outcome = await self._storage_failed(batch, exc)
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
                await self._record_end(turn_id, outcome)
                await self._spend(last, turn_id)

    async def _taken_over(self, batch: list[InboundMessage], control: TurnSignal) -> bool:
        """A batch taken over from a process that died running it (several processes): if a
        turn took these events, finish that one in its placeholder (never a second one), or, if
        it ended before its process died, leave it be: nothing is answered twice. False: no
        turn was recorded, so the batch is run as new."""
        assert self.resumer is not None
        last = batch[-1]
        turn = await self.store.turn_for_events(last.conversation_key, [m.event_id for m in batch])
        if turn is None:
            return False
        if turn["status"] == "running":
            await self.resumer.resume_turn(str(turn["id"]), control)
        else:
            log.info("turn %s had ended (%s) before its process died", turn["id"], turn["status"])
        return True

    async def _record_end(self, turn_id: str, outcome: Outcome) -> None:
        final = outcome.text if outcome.status == "completed" else None
        status = "failed" if outcome.status == "undelivered" else outcome.status
        await self.ends.record(turn_id, status, final, outcome.error)  # kept and retried if refused

    async def _over_quota(self, message: InboundMessage) -> str | None:
        """What the placeholder says instead of an answer, if a quota is reached; else None and
        the turn is counted."""
        return None if self.quotas is None else await self.quotas.admit(message)

    async def _spend(self, message: InboundMessage, turn_id: str) -> None:
        """The turn's tokens (its specialists' so far included) count against its quotas."""
        if self.quotas is None or not self.quotas.counts_tokens:
            return
        try:
            used = await self.store.turn_usage(turn_id)
            await self.quotas.spend(message, used["input_tokens"] + used["output_tokens"])
        except StorageError as exc:
            log.error("turn %s: its tokens were not counted against quotas: %s", turn_id, exc)

    async def _storage_failed(self, batch: list[InboundMessage], exc: StorageError) -> Outcome:
        """The messages are in no store: say so in the log, ask the user to send them again, and
        reopen their events so a platform's retry is answered (`Dedup.reopen`)."""
        log.error(
            "storage failed in %s; message(s) %s not kept, the user is asked to send again: %s",
            batch[-1].conversation_key,
            ", ".join(m.event_id for m in batch),
            exc,
        )
        try:
            for message in batch:
                await self.dedup.reopen(message.event_id)
        except StorageError:
            pass  # the same failure, logged above; the claims expire with their TTL
        return Outcome("failed", STORAGE_FAILED, error=f"storage: {exc}")

    async def work(
        self,
        turn: TurnInput,
        delivery: Delivery,
        control: TurnSignal,
        replay: ReplayPoint | None = None,
    ) -> Outcome:
        """The coordinator's part of a turn (new, or resumed from `replay`), within its deadline;
        a stop, a timeout or a failure becomes what the placeholder says."""
        if control.stopped:  # a /stop while the placeholder was being posted
            return Outcome("stopped", STOPPED)
        control.work = asyncio.create_task(
            self.coordinator.run_turn(turn, delivery.on_event, replay, control)
        )
        try:
            async with asyncio.timeout(self.timeout_s):
                result = await control.work
        except asyncio.CancelledError:
            if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                raise  # shutdown (awaiting the work cancelled it too)
            return Outcome("stopped", STOPPED)
        except StorageError:
            raise  # the turn ends with its own note (see `run`)
        except TimeoutError:
            log.warning("turn %s timed out after %ss", turn.turn_id, self.timeout_s)
            return Outcome("failed", TIMED_OUT, error="turn timeout")
        except ProviderError as exc:
            log.error("turn %s failed: model provider: %s", turn.turn_id, exc)
            return Outcome("failed", f"Sorry — {exc.user_message}", error=_describe(exc))
        except Exception as exc:
            if (fault := _storage_fault(exc)) is not None:
                raise fault from exc  # a tool's audit row, say, failed inside a task group
            log.exception("turn %s failed", turn.turn_id)
            return Outcome("failed", APOLOGY, error=_describe(exc))
        finally:
            control.work = None
        return Outcome("completed", result.text, tuple(result.display))

    async def _post_placeholder(self, delivery: Delivery, batch: list[InboundMessage]) -> bool:
        """Post it, waiting out rate limits; if it cannot be posted, let a redelivery try again.

        A send of unknown fate may be showing: no second placeholder then, and no previews (the
        delivery has nothing to edit); the final comes as one new message. Neither Telegram's
        polling nor its webhook would ever redeliver the message, so giving up would lose it.
        """
        for attempt in range(1, PLACEHOLDER_ATTEMPTS + 1):
            try:
                await delivery.start()
                return True
            except DeliveryUncertain as exc:
                log.warning("placeholder in %s unconfirmed (%s)", batch[-1].chat.key, exc)
                return True
            except RateLimited as exc:
                if attempt < PLACEHOLDER_ATTEMPTS:
                    await asyncio.sleep(exc.retry_after)
            except ChannelError as exc:
                log.error("no placeholder in %s: %s", batch[-1].chat.key, exc)
                break
        for message in batch:
            await self.dedup.reopen(message.event_id)  # nothing was shown: a retry may answer
        return False


def _storage_fault(exc: BaseException) -> StorageError | None:
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if (fault := _storage_fault(inner)) is not None:
                return fault
    return None


def _describe(exc: BaseException) -> str:
    """For `turns.error`: an error's text may hold a URL with its password (from any library)."""
    return redact_credentials(f"{type(exc).__name__}: {exc}")


def _combine(batch: list[InboundMessage], masker: PiiMasker | None = None) -> str:
    """The turn's input: the batch's messages; personal data masked when `masker` is given."""
    parts = []
    for message in batch:
        text = message.action.describe() if message.action else message.text.strip()
        for attachment in message.attachments:
            label = attachment.name or attachment.mime_type or ""
            text += f"\n[attachment: {attachment.kind} {label}]".rstrip()
        parts.append(text.strip())
    combined = "\n\n".join(parts)
    return masker.mask(combined) if masker is not None else combined


def _shown(batch: list[InboundMessage], masker: PiiMasker | None) -> list[dict[str, str]]:
    """The user's messages of the turn as their chat showed them, for the transcript: with their
    ids, a button press as its label (as the web channel's `message.user`), masked like the
    history. System input (a background result, which has no message id) is no one's message."""
    shown = []
    for message in batch:
        if message.message_id is None or not message.user_id:
            continue
        action = message.action
        text = (action.label or action.value or action.action_id) if action else message.text
        shown.append(
            {"message_id": message.message_id, "text": masker.mask(text) if masker else text}
        )
    return shown


def _user_text_masker(coordinator: Coordinator) -> PiiMasker | None:
    """`tools.pii.mask_user_text`: the tools' settings are the coordinator's `tools_config`."""
    settings = coordinator.services.get("tools_config")
    return settings.pii.user_text_masker() if isinstance(settings, ToolsSettings) else None
