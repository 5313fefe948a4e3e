"""An answer as one native Slack stream: chat.startStream, appendStream, stopStream.

A stream only appends, so what it shows is chosen to never need taking back:

- The answer's text goes out as `markdown_text` chunks, each carrying only what is new, and only
  up to the answer's last whitespace: an append never starts with whitespace (Slack may drop it
  where chunks join) nor splits a word or a `<!…>` that `safe_markdown` must see whole.
- The turn's steps (specialists, labelled tools) are `task_update` chunks with the step's id: a
  task's title and status replace its earlier ones (pending, in_progress, complete, error), so a
  step that ends is marked, not removed.
- A note shown while no answer has streamed (a `SendMessage` note, "Asking Researcher…") is the
  plan's title (`plan_update`, `task_display_mode: plan`): a title is replaced, never appended,
  so the note never has to vanish from the text. The placeholder ("Thinking…") is not shown at
  all: Slack shows its own loading state while the stream is empty.
- An answer the model restarted (its text no longer begins with what was streamed: the preamble
  before a tool call, a provider's retry), or a final that does not extend it, ends the stream
  and the same message is `chat.update`d from then on: still one message. So does a stream
  Slack ended (it lives about five minutes; a user's stop ends it too) or any refusal.

`start` returns None where no stream can be had (no thread to reply in, a channel without the
recipient's ids, no Tier 2 start free now, Slack refused): the caller posts a message instead.
Every call goes through the channel's `call` (the workspace budget, errors as `ChannelError`s).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.base import (
    ChannelError,
    ChannelRevoked,
    ChatRef,
    DeliveryUncertain,
    MessageHandle,
    OutboundContent,
    RateLimited,
)
from adapters.budget import Rank
from adapters.live import Live, Step
from adapters.slack import errors
from adapters.slack.render import safe_markdown
from adapters.telegram.recent import Recent

log = logging.getLogger(__name__)

Call = Callable[..., AbstractAsyncContextManager[None]]

REMEMBERED = 4096
REFUSAL_KEPT_S = 600.0  # a channel that refused a stream is not asked again for this long
TITLE_CHARS = 256  # a task's or a plan's title
TASK_STATUS = {"running": "in_progress", "completed": "complete"}  # failed, killed, timeout: error
_SETTLED = re.compile(r".*\s", re.DOTALL)


@dataclass
class Stream:
    chat: ChatRef
    channel: str
    ts: str
    placeholder: str  # the text it was started for: not shown
    streamed: str | None = ""  # the answer's markdown appended so far; None: not known
    tasks: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> title, status
    plan: str = ""


def answer_of(content: OutboundContent) -> str | None:
    """The answer this message shows, if it shows all of it (not when a long answer goes on in
    further messages: then this one is a part, and the update path shows it)."""
    live = content.live
    if live is None:
        return content.text
    return live.answer if content.text.startswith(live.answer) else None


def settled(answer: str) -> str:
    """What of a growing answer may be appended now: up to and with its last whitespace."""
    match = _SETTLED.match(answer)
    return match.group(0) if match else ""


class Streams:
    def __init__(self, client: AsyncWebClient, call: Call) -> None:
        self._client = client
        self._call = call
        self._open: Recent[tuple[str, str], Stream] = Recent(REMEMBERED)
        self._refused: Recent[str, float] = Recent(REMEMBERED)  # channel -> when it refused
        self.ended: Recent[tuple[str, str], None] = Recent(REMEMBERED)  # streamed, now updated

    def get(self, handle: MessageHandle) -> Stream | None:
        """The open stream of a message; one we started but do not remember (another process
        started it, or this one forgot it) is known by its handle, its text unknown."""
        channel = str(handle.data.get("channel") or handle.chat.chat_id)
        key = (channel, handle.message_id)
        stream = self._open.get(key)
        if stream is None and handle.data.get("stream") and key not in self.ended:
            stream = Stream(handle.chat, channel, handle.message_id, "", streamed=None)
            self._open.put(key, stream)
        return stream

    def ended_by_slack(self, channel: str, stamps: list[str]) -> None:
        """Slack ended these streams (the user stopped the agent session): no stop call is
        spent on them (Tier 2, a slot every few seconds); their final is an update."""
        for ts in stamps:
            stream = self._open.get((channel, ts))
            if stream is not None:
                self._forget(stream)

    async def start(
        self, chat: ChatRef, content: OutboundContent, recipient: str | None
    ) -> MessageHandle | None:
        direct = chat.chat_id.startswith("D")
        refused = self._refused.get(chat.chat_id)
        if refused is not None and time.monotonic() - refused < REFUSAL_KEPT_S:
            return None  # asked lately and refused: posted, without asking each time
        if not chat.thread_id:
            return None  # a stream must be a reply in a thread
        if content.live is not None and answer_of(content) is None:
            return None  # the rest of a long answer: a part, as the update path shows it
        if not direct and not (recipient and chat.team_id):
            return None  # channels need the recipient's user and team
        args: dict[str, Any] = {
            "channel": chat.chat_id,
            "thread_ts": chat.thread_id,
            "task_display_mode": "plan",
        }
        if recipient and chat.team_id:
            args |= {"recipient_user_id": recipient, "recipient_team_id": chat.team_id}
        try:
            async with self._call("chat.startStream", chat, "preview", sending=True):
                response = await self._client.chat_startStream(**args)
        except RateLimited:
            return None  # no Tier 2 start free now: this answer is posted and updated
        except (DeliveryUncertain, ChannelRevoked):
            raise
        except ChannelError as exc:
            log.info("Slack refused a stream in %s (%s): posting instead", chat.key, exc)
            self._refused.put(chat.chat_id, time.monotonic())
            return None
        ts, channel = str(response["ts"]), str(response.get("channel") or chat.chat_id)
        self._open.put((channel, ts), Stream(chat, channel, ts, content.text))
        return MessageHandle(chat, ts, {"channel": channel, "stream": True})

    async def preview(self, stream: Stream, content: OutboundContent) -> bool:
        """Append what is new; False once the message is no stream any more (update it)."""
        answer = answer_of(content)
        if stream.streamed is None or answer is None or not answer.startswith(stream.streamed):
            await self._end(stream, content.live, "preview")
            return False
        suffix = settled(answer)[len(stream.streamed) :]
        tasks = self._tasks(stream, content.live)
        plan = self._plan(stream, content.live)
        chunks = _chunks(plan, tasks, suffix)
        if not chunks:
            return True
        try:
            async with self._call("chat.appendStream", stream.chat, "preview", ts=stream.ts):
                await self._client.chat_appendStream(
                    channel=stream.channel, ts=stream.ts, chunks=chunks
                )
        except (RateLimited, ChannelRevoked):
            raise
        except ChannelError as exc:  # refused, lost (it may have landed), or ended by Slack
            log.info("stream %s in %s ended (%s): updated instead", stream.ts, stream.chat.key, exc)
            stream.streamed = None  # what shows is not known: it is stopped and updated
            await self._end(stream, None, "preview")
            return False
        stream.streamed += suffix
        stream.tasks |= tasks
        stream.plan = plan if plan is not None else stream.plan
        return True

    async def finish(
        self, stream: Stream, content: OutboundContent, hints: Sequence[dict[str, Any]]
    ) -> bool:
        """Stop the stream with the rest of the final; False if the final is not what it
        streamed plus more (the caller then updates the message to it)."""
        text = content.text
        extends = stream.streamed is not None and text.startswith(stream.streamed)
        suffix = text[len(stream.streamed or "") :] if extends else ""
        tasks = self._tasks(stream, content.live)
        chunks = _chunks(None, tasks, suffix)
        args: dict[str, Any] = {"channel": stream.channel, "ts": stream.ts}
        if chunks:
            args["chunks"] = chunks
        if extends and hints:
            args["blocks"] = list(hints)
        try:
            async with self._call("chat.stopStream", stream.chat, "final", ts=stream.ts):
                try:
                    await self._client.chat_stopStream(**args)
                except SlackApiError as exc:
                    if "blocks" not in args or errors.error_code(exc) not in errors.BAD_BLOCKS:
                        raise
                    log.warning("Slack refused the blocks (%s); the stream ends without", exc)
                    await self._client.chat_stopStream(**{**args, "blocks": None})
        except (RateLimited, ChannelRevoked):
            raise
        except ChannelError as exc:  # ended by Slack already, refused, or its answer lost
            log.info("stream %s in %s not stopped (%s): updated", stream.ts, stream.chat.key, exc)
            await self._end(stream, None, "final")  # a plain stop, in case it is still open
            return False
        self._forget(stream)
        return extends

    async def _end(self, stream: Stream, live: Live | None, rank: Rank) -> None:
        """Stop a stream that cannot go on (its tasks as they are now); the message is updated
        from here on."""
        chunks = _chunks(None, self._tasks(stream, live), "")
        try:
            async with self._call("chat.stopStream", stream.chat, rank, ts=stream.ts):
                await self._client.chat_stopStream(
                    channel=stream.channel, ts=stream.ts, chunks=chunks or None
                )
        except (RateLimited, ChannelRevoked):
            raise
        except ChannelError as exc:  # ended already (expired, stopped by the user) or refused
            log.info("stream %s in %s: %s", stream.ts, stream.chat.key, exc)
        self._forget(stream)

    def _forget(self, stream: Stream) -> None:
        self._open.discard((stream.channel, stream.ts))
        self.ended.put((stream.channel, stream.ts), None)

    @staticmethod
    def _tasks(stream: Stream, live: Live | None) -> dict[str, tuple[str, str]]:
        """The steps whose title or status changed since the stream last showed them."""
        changed = {}
        for step in live.steps if live is not None else ():
            shown = _task(step)
            if stream.tasks.get(step.id) != shown:
                changed[step.id] = shown
        return changed

    @staticmethod
    def _plan(stream: Stream, live: Live | None) -> str | None:
        """The plan's new title: the note shown while no answer streams, if it changed."""
        note = (live.note if live is not None else "").strip()[:TITLE_CHARS]
        if not note or note == stream.placeholder or note == stream.plan:
            return None
        return note


def _task(step: Step) -> tuple[str, str]:
    return (step.title[:TITLE_CHARS] or "…", TASK_STATUS.get(step.status, "error"))


def _chunks(
    plan: str | None, tasks: dict[str, tuple[str, str]], markdown: str
) -> list[dict[str, Any]]:
    made: list[dict[str, Any]] = []
    if plan is not None:
        made.append({"type": "plan_update", "title": plan})
    for task_id, (title, status) in tasks.items():
        made.append({"type": "task_update", "id": task_id, "title": title, "status": status})
    if markdown:
        made.append({"type": "markdown_text", "text": safe_markdown(markdown)})
    return made
