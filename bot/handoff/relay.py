"""The gateway's side of a handoff: what operators write, what users write, and turn edges.

- A message in the operators' place (a Slack thread reply, a button press) is an operator's:
  it never reaches the model; a reply goes to the user, a button takes, releases or resolves.
- A user's message in a held conversation is recorded by the mode handler (bot/pipeline/held.py)
  and then relayed here to the operators.
- Before a turn: a batch queued while the bot still had the conversation, whose conversation a
  person took meanwhile, is held instead (no model call while a person holds it).
- After a turn: a `transfer_to_human` the model called is switched to only now, once the turn's
  final reply is out, so the final and the switch never race; its notice is the last message.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from adapters.base import Channel, ChannelError, InboundMessage, OutboundContent
from bot.handoff.desk import HandoffDesk
from bot.handoff.model import ACTIONS, ASKED_SETTING, Asked, HandoffError, Operator
from bot.pipeline.handoff_seam import Hold
from bot.pipeline.routing import Reply
from bot.storage.rows import HandoffRow
from tools.base import ToolContext

log = logging.getLogger(__name__)

RESUMED = "resume:"  # a queued resumption (bot/pipeline/turn.py RESUME_EVENT): never held
SWITCH = "handoff:"  # a queued `/human`: the switch, once the turn before it has ended
COMMANDS = {"!release": "release", "!resolve": "resolve", "!take": "take"}


class HandoffRelay:
    def __init__(self, desk: HandoffDesk, channels: Mapping[str, Channel]) -> None:
        self.desk = desk
        self.channels = channels
        # conversations whose turn called transfer_to_human (or found a request left behind)
        self._asked: set[str] = set()

    # -- operators ---------------------------------------------------------------------
    def operates(self, message: InboundMessage) -> bool:
        """In the operators' place, and not another section's button (pairing, approvals may
        share the channel)."""
        place = self.desk.place
        if place is None or not place.owns(message.chat):
            return False
        return message.action is None or message.action.action_id in ACTIONS

    async def operate(self, message: InboundMessage, reply: Reply) -> None:
        """An operator's message or button press (its event claimed already)."""
        operator = Operator(f"{message.chat.channel}:{message.user_id}", _name(message))
        try:
            if message.action is not None:
                how = ACTIONS.get(message.action.action_id)
                if how is None or not message.action.value:
                    return
                await self._act(message.action.value, operator, how, message)
                return
            row = await self._thread_handoff(message)
            if row is None:
                return  # talk in the channel, not in a handoff's thread
            word = message.text.strip().lower()
            if word in COMMANDS:
                await self._act(row.id, operator, COMMANDS[word], message)
            elif message.text.strip():
                await self.desk.reply(row.id, operator, message.text, event_id=None, via="place")
        except HandoffError as exc:
            await reply(message, f"⚠️ {exc}")
        except ChannelError as exc:  # the user's channel refused: the operator must know
            log.error("an operator's message did not reach the user: %s", exc)
            await reply(message, f"⚠️ not delivered to the user: {exc}")

    async def _act(
        self, handoff_id: str, operator: Operator, how: str, message: InboundMessage
    ) -> None:
        if how == "take":
            await self.desk.take(handoff_id, operator, via="place")
        else:
            await self.desk.end(
                handoff_id, operator, "release" if how == "release" else "resolve", via="place"
            )

    async def _thread_handoff(self, message: InboundMessage) -> HandoffRow | None:
        thread = message.chat.thread_id
        if not thread or thread == message.message_id:
            return None
        return await self.desk.records.handoff_by_thread(thread)

    # -- users -------------------------------------------------------------------------
    async def held(self, message: InboundMessage) -> None:
        """A user's message the mode handler recorded: shown to the operators."""
        text = message.text or (message.action.describe() if message.action else "")
        if message.attachments or message.parts:
            text = f"{text} [+{len(message.attachments) + len(message.parts)} attachment(s)]"
        try:
            await self.desk.relay(
                message.conversation_key, message.user_name or message.user_id, text
            )
        except Exception:  # recorded already: the transcript has it, the place missed it
            log.exception("a held message of %s was not relayed", message.conversation_key)

    async def before_turn(self, batch: list[InboundMessage], hold: Hold) -> list[InboundMessage]:
        """The batch, or only its resumptions if a person holds the conversation now. The one
        state read a turn costs: it also finds a request a dead process's turn left behind."""
        key = batch[-1].conversation_key if batch else ""
        batch = [m for m in batch if not m.event_id.startswith(SWITCH)]  # no turn of its own
        fresh = [m for m in batch if not m.event_id.startswith(RESUMED)]
        try:
            state = await self.desk.states.get(key)
        except Exception:  # the queue took it in bot mode: the bot answers rather than nobody
            log.exception("the state of %s not read before its turn", key)
            return batch
        if ASKED_SETTING in state.settings:
            self._asked.add(key)
        if not fresh or state.mode == "bot":
            return batch
        for message in fresh:
            await hold(message, state.mode)
        return [m for m in batch if m.event_id.startswith(RESUMED)]

    async def after_turn(self, batch: Sequence[InboundMessage]) -> None:
        """A request the model made during the turn, switched to now its final is out."""
        if not batch or batch[-1].conversation_key not in self._asked:
            return  # no transfer_to_human in this turn: no second read
        last = batch[-1]
        self._asked.discard(last.conversation_key)
        try:
            state = await self.desk.states.get(last.conversation_key)
            kept = state.settings.get(ASKED_SETTING)
            if kept is None:
                return
            language = state.settings.get("language") or last.language
            asked = Asked.loads(kept)
            notice = await self.desk.ask(last.chat, asked, language=language, via=asked.via)
        except Exception:  # the turn is over and answered: the request is lost, said in the log
            log.exception("the model's handoff request in %s failed", last.conversation_key)
            return
        channel = self.channels.get(last.chat.channel)
        if channel is None:
            return
        try:
            await channel.send(last.chat, OutboundContent(notice), final=True)
        except ChannelError as exc:
            log.error("the handoff notice did not reach %s: %s", last.chat.key, exc)

    # -- the model's tool --------------------------------------------------------------
    async def transfer(self, ctx: ToolContext, reason: str, summary: str) -> str:
        """`transfer_to_human`: kept in the conversation's state until the turn's final is out."""
        refusal = self.desk.unavailable(None)
        if refusal is not None:
            return (
                "No person can take over now: " + refusal + " Tell the user so, in your own"
                " words, and keep helping."
            )
        asked = Asked(reason, summary, ctx.user_id)
        self._asked.add(ctx.conversation_key)
        state = await self.desk.states.update(
            ctx.conversation_key, lambda s: s.with_setting(ASKED_SETTING, asked.dumps())
        )
        if state.mode != "bot":
            return "A person is already asked for or holds this conversation; say nothing more."
        return (
            "Done: once your reply is sent, the user is told that a person was asked, and"
            " operators see your reason and summary. End with one short sentence saying a"
            " colleague will take over; do not promise a time, do not repeat the summary."
        )


def _name(message: InboundMessage) -> str:
    return message.user_name or message.user_id
