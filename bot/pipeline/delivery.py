"""The per-turn placeholder: one message posted before the model runs, edited into the answer.

A delivery turns `TurnEvent`s into edits at the channel's safe cadence. Newest text wins: while an
edit waits for its slot, later text replaces it, so stale intermediate states are never sent. The
final edit always goes out (after any rate-limit pause), and text past the channel's length limit
continues in new messages. A failed preview is logged and skipped; a final edit the platform keeps
refusing is posted once as a new message instead. A send whose fate is unknown
(`DeliveryUncertain`) is never sent again. A channel that cannot edit gets only the final, and
`max_edits_per_message` keeps the last edit of a message for the final. Tool and specialist status
lines show under the text while they run.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeGuard

from adapters.base import (
    Channel,
    ChannelError,
    ChannelLimits,
    ChatRef,
    DeliveryUncertain,
    EventSink,
    MessageGone,
    MessageHandle,
    NamesItsMessages,
    OutboundContent,
    RateLimited,
)
from adapters.live import Live
from bot.pipeline.attachments import send_parts_or_say
from bot.pipeline.live_steps import Steps
from bot.pipeline.status_frame import emit_status, shown_name
from bot.pipeline.textsplit import split_text
from content.blobs import BlobStore
from content.parts import Part
from content.texts import DEFAULT_LANGUAGE, t
from tools.events import (
    AgentFinished,
    AgentStarted,
    AnswerDelta,
    AnswerReset,
    Failed,
    Final,
    Interim,
    ToolFinished,
    ToolStarted,
    TurnEvent,
)

log = logging.getLogger(__name__)

PLACEHOLDER = t(DEFAULT_LANGUAGE, "turn.placeholder")  # in English; a delivery's own: `language`
APOLOGY = t(DEFAULT_LANGUAGE, "turn.apology")
FINAL_ATTEMPTS = 5  # for failed edits
FINAL_DEADLINE_S = 60.0  # for rate limits: the final waits them out, up to this long


class Delivery:
    def __init__(
        self,
        channel: Channel,
        chat: ChatRef,
        *,
        reply_to: str | None = None,
        recipient: str | None = None,
        limits: ChannelLimits | None = None,
        blobs: BlobStore | None = None,
        language: str = DEFAULT_LANGUAGE,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        stopped: Callable[[], bool] = lambda: False,
    ) -> None:
        """`language`: the conversation's, for the texts the delivery writes itself (the
        placeholder, status lines, the apology). `clock` and `sleep` set the edit cadence and
        rate-limit pauses (a test moves them). `stopped`: once true, no more previews (the
        work's ending would take the chat's budget from the stop's final: 1 s on Telegram)."""
        self.channel = channel
        self.language = language
        self.placeholder = t(language, "turn.placeholder")
        self.blobs = blobs  # where the answer's media are read from to be sent
        self.chat = chat
        self.reply_to = reply_to
        self.recipient = recipient  # the user answered (some platforms need it to post)
        self.limits = limits or channel.limits_for(chat)
        self.handles: list[MessageHandle] = []
        self.edits = 0
        self._sent: list[str] = []  # text last shown in each handle
        self._edits: list[int] = []  # edits each handle has taken
        self._interim = self.placeholder
        self._note = ""  # the last SendMessage note: kept by a stop when no answer streamed
        self._answer: list[str] = []
        self._steps = Steps()  # the status lines under the text, and `Live`'s steps
        self._dirty = asyncio.Event()
        self._io = asyncio.Lock()  # one send/edit in flight; the final waits for it
        self._last_edit = 0.0
        self._paused_until = 0.0
        self._flusher: asyncio.Task[None] | None = None
        self._done = False
        self._uncertain = False  # a preview's new message may or may not have been posted
        self._clock = clock
        self._sleep = sleep
        self._stopped = stopped
        self._reserved: MessageHandle | None = None
        self._answer_seen = False  # a preview of the answer's own text reached the user

    def reserve(self) -> MessageHandle | None:
        """The placeholder's handle before it is posted, where the gateway makes the id itself
        (`NamesItsMessages`): the turn records it first. None elsewhere (and without edits)."""
        channel = self.channel
        if self._reserved is None and self.limits.can_edit and _names_its_messages(channel):
            self._reserved = channel.reserve(self.chat, self.reply_to)
        return self._reserved

    async def start(self, text: str | None = None) -> MessageHandle | None:
        """Post the placeholder (`text`, else "Thinking…" in the delivery's language), under its
        reserved handle if any; previews flow from here on. A channel that cannot edit gets no
        placeholder and no previews: only the final, as new message(s)."""
        text = self.placeholder if text is None else text
        self._interim = text
        if not self.limits.can_edit:
            return None
        if self._reserved is not None and _names_its_messages(self.channel):
            handle = self._reserved
            await self.channel.post(handle, OutboundContent(text))
        else:
            handle = await self.channel.send(
                self.chat, OutboundContent(text), reply_to=self.reply_to, recipient=self.recipient
            )
        self._add(handle, text)
        self._last_edit = self._clock()
        self._flusher = asyncio.create_task(self._flush_loop(), name=f"delivery:{self.chat.key}")
        return handle

    def adopt(self, handle: MessageHandle) -> None:
        """Go on with a placeholder posted earlier (by a process that died mid-turn): previews
        and the final land in it, as if this delivery had posted it. What it shows now is not
        known, so the first preview and the final are always sent."""
        self._add(handle, "")
        self._flusher = asyncio.create_task(self._flush_loop(), name=f"delivery:{self.chat.key}")

    async def on_event(self, event: TurnEvent) -> None:
        if isinstance(event, AgentStarted | AgentFinished):
            await self._status_frame(event)  # also after the final: background workers end later
        if self._done:
            return
        if isinstance(event, ToolStarted | ToolFinished):
            if not event.label:
                return  # control tools show themselves (AgentTool's own line, SendMessage's note)
            await self._status_frame(event)
        match event:
            case AnswerDelta(text=text):
                self._answer.append(text)
            case AnswerReset():
                self._answer.clear()
            case Interim(text=text):
                self._interim = self._note = text
                self._answer.clear()
            case AgentStarted(task_id=task_id):
                # users see the persona's display name, never its internal name or the prompt
                kind, what = shown_name(event), event.shown_description
                self._steps.agent_started(task_id, f"{kind} — {what}")
                if self._interim == self.placeholder:
                    self._interim = t(self.language, "turn.asking", name=kind)
            case AgentFinished(task_id=task_id, status=status):
                self._steps.agent_finished(task_id, status)
            case Final(text=text, display=display, parts=parts):
                await self.finish(text, display, parts)
                return
            case Failed(reason=reason):
                log.warning("turn failed in %s: %s", self.chat.key, reason)
                await self.finish(t(self.language, "turn.apology"))
                return
            case ToolStarted(call_id=call_id, label=label):
                self._steps.tool_started(call_id, label)
            case ToolFinished(call_id=call_id, ok=ok):
                self._steps.tool_finished(call_id, ok)
        self._dirty.set()

    async def _status_frame(
        self, event: AgentStarted | AgentFinished | ToolStarted | ToolFinished
    ) -> None:
        """Channels that show turn status themselves (the web socket) get it as a frame."""
        if _sinks_events(self.channel):
            placeholder = self.handles[0].message_id if self.handles else None
            await emit_status(self.channel, self.chat, event, placeholder)

    def live(self, final: str | None = None) -> Live:
        """The turn's state in parts (`final`: the answer's last text)."""
        answer = "".join(self._answer) if final is None else final
        note = "" if answer else self._interim
        return Live(answer, note, self._steps.view(), self.language)

    def preview(self) -> str:
        body = "".join(self._answer) if self._answer else self._interim
        lines = self._steps.lines()
        if lines:
            body = body + "\n\n" + "\n".join(lines)
        return body

    async def finish(
        self,
        text: str,
        display: tuple[Mapping[str, Any], ...] = (),
        parts: tuple[Part, ...] = (),
        *,
        stopped: bool = False,
    ) -> None:
        """The last word: replaces the placeholder (and continues past the length limit). The
        display hints and media go with its last message, and so does `stopped`."""
        if self._done:
            return
        self._done = True
        async with self._io:
            await self._stop_flusher()
            chunks = split_text(text or "…", self.limits.max_text_length, self.limits.length)
            for index, chunk in enumerate(chunks):
                last = index == len(chunks) - 1
                extra = (display, parts, stopped, self.live(text)) if last else ((), (), False)
                await self._put_final(index, OutboundContent(chunk, *extra))
            for index in range(len(chunks), len(self.handles)):
                await self._put_final(index, OutboundContent("⋯"))
            # where the final message cannot carry them (`parts_inline`), each part follows it
            await send_parts_or_say(
                self.channel, self.chat, parts, self.blobs, reply_to=self.reply_to,
                language=self.language, sleep=self._sleep,
            )  # fmt: skip

    async def close(self) -> None:
        """Stop previews without a final (the caller decides what the user sees)."""
        self._done = True
        await self._stop_flusher()

    async def _stop_flusher(self) -> None:
        flusher, self._flusher = self._flusher, None
        if flusher is not None:
            flusher.cancel()
            # wait() neither raises the flusher's cancellation nor hides our own
            await asyncio.wait([flusher])
            if not flusher.cancelled() and flusher.exception() is not None:
                log.error(
                    "preview flusher of %s crashed", self.chat.key, exc_info=flusher.exception()
                )

    async def _flush_loop(self) -> None:
        while True:
            await self._dirty.wait()
            wait = max(self._last_edit + self.limits.min_edit_interval_s, self._paused_until)
            delay = wait - self._clock()
            if delay > 0:
                await self._sleep(delay)
            self._dirty.clear()
            async with self._io:
                if self._done or self._stopped():
                    return
                showing = self._steps.showing()
                # from here the user may see the answer (a send in flight may land)
                self._answer_seen = self._answer_seen or bool(self._answer)
                await self._put_preview(self.preview())
                if self._steps.previewed(showing):
                    self._dirty.set()

    async def finish_stopped(self, mark: str) -> None:
        """A stopped turn's last word: its answer so far (else its last SendMessage note) stays,
        `mark` ("⏹ Stopped.") its last paragraph; only the mark when nothing else showed."""
        kept = ("".join(self._answer) if self._answer else self._note).rstrip()
        await self.finish(f"{kept}\n\n{mark}" if kept else mark, stopped=True)

    def answer_shown(self) -> str | None:
        """The streamed answer, if a preview of it went out (it may be on the user's screen): a
        failure after that (the store refusing to save it) must not take it back."""
        return "".join(self._answer) if self._answer_seen and self._answer else None

    async def _put_preview(self, text: str) -> bool:
        chunks = split_text(text, self.limits.max_text_length, self.limits.length)
        for index, chunk in enumerate(chunks):
            if index < len(self._sent) and self._sent[index] == chunk:
                continue
            if index >= len(self.handles) and self._uncertain:
                break  # a continuation may already be out: only the final adds messages now
            if index < len(self.handles) and not self._may_preview(index):
                continue  # this message's last edit is kept for the final
            try:
                await self._put(index, OutboundContent(chunk, live=self.live()), final=False)
            except RateLimited as exc:
                self._paused_until = self._clock() + exc.retry_after
                self._dirty.set()
                return False
            except ChannelError as exc:
                log.info("preview edit failed in %s: %s", self.chat.key, exc)
                self._uncertain = self._uncertain or isinstance(exc, DeliveryUncertain)
                return False
            except Exception:
                # an adapter bug must cost a preview, never the turn or the process
                log.exception("preview edit crashed in %s", self.chat.key)
                return False
        self._last_edit = self._clock()
        return True

    final_retry_pause_s = 0.25  # before the second try of a refused final edit; then doubled

    async def _put_final(self, index: int, content: OutboundContent) -> None:
        """Land one part of the final: wait out rate limits (up to FINAL_DEADLINE_S), retry a
        refused edit (an edit is idempotent) and, after FINAL_ATTEMPTS, post the part as a new
        message instead, once: a new message whose fate is unknown is never resent, since a
        duplicate is worse than a gap the log reports."""
        unchanged = index < len(self._sent) and self._sent[index] == content.text
        if unchanged and not (content.display or content.parts) and not self.limits.final_marker:
            return  # already shown exactly so (e.g. the last SendMessage note): never twice
        deadline = self._clock() + FINAL_DEADLINE_S
        attempt = 0
        while True:
            pause = self._paused_until - self._clock()
            if pause > 0:
                if self._clock() + pause > deadline:
                    raise ChannelError(f"still rate limited after {FINAL_DEADLINE_S:.0f} s")
                await self._sleep(pause)
            attempt += 1
            try:
                await self._put(index, content, final=True)
                return
            except RateLimited as exc:
                self._paused_until = self._clock() + exc.retry_after
            except MessageGone:
                await self._post_instead(index, content)
                return
            except ChannelError as exc:
                is_new_message = index >= len(self.handles)
                log.warning("final part %d failed in %s: %s", index, self.chat.key, exc)
                if is_new_message:
                    raise
                if attempt >= FINAL_ATTEMPTS:
                    # the answer must reach the user: no platform redelivers the message
                    log.warning(
                        "final part %d in %s goes out as a new message", index, self.chat.key
                    )
                    await self._post_instead(index, content)
                    return
                await self._sleep(min(self.final_retry_pause_s * 2.0 ** (attempt - 1), 4.0))

    async def _post_instead(self, index: int, content: OutboundContent) -> None:
        """A new message takes the place of the one at `index` (gone, or refusing edits)."""
        self.handles[index] = await self._send(content, final=True)
        self._sent[index] = content.text
        self._edits[index] = 0

    def _may_preview(self, index: int) -> bool:
        cap = self.limits.max_edits_per_message
        return cap is None or self._edits[index] < cap - 1

    async def _put(self, index: int, content: OutboundContent, *, final: bool) -> None:
        cap = self.limits.max_edits_per_message
        if index < len(self.handles) and (cap is None or self._edits[index] < cap):
            await self.channel.edit(self.handles[index], content, final=final)
            self._sent[index] = content.text
            self._edits[index] += 1
            self.edits += 1
        elif index < len(self.handles):  # out of edits (cannot happen for a final): a new one
            self.handles[index] = await self._send(content, final=final)
            self._sent[index] = content.text
            self._edits[index] = 0
        else:
            self._add(await self._send(content, final=final), content.text)

    async def _send(self, content: OutboundContent, *, final: bool) -> MessageHandle:
        return await self.channel.send(self.chat, content, final=final, recipient=self.recipient)

    def _add(self, handle: MessageHandle, text: str) -> None:
        self.handles.append(handle)
        self._sent.append(text)
        self._edits.append(0)


# per (channel class, protocol): whether the class is one; a protocol's isinstance looks up
# each of its members (~5 us), and these are asked every turn or every tool call
_KINDS: dict[tuple[type, type], bool] = {}


def _is(channel: Channel, protocol: type) -> bool:
    key = (type(channel), protocol)
    found = _KINDS.get(key)
    if found is None:
        found = _KINDS[key] = isinstance(channel, protocol)
    return found


def _names_its_messages(channel: Channel) -> TypeGuard[NamesItsMessages]:
    return _is(channel, NamesItsMessages)


def _sinks_events(channel: Channel) -> TypeGuard[EventSink]:
    return _is(channel, EventSink)
