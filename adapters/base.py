"""The message vocabulary every channel speaks, and the `Channel` protocol.

Channels turn platform events into `InboundMessage`s and render `OutboundContent` back. Shared
behaviour (dedup, access policy, edit throttling) lives in `bot/`, not here.

Errors a channel raises when sending or editing::

    ChannelError            any failure talking to the platform
     ├── RateLimited        the platform asked us to wait `retry_after` seconds
     ├── MessageGone        the message to edit no longer exists (deleted, too old)
     ├── DeliveryUncertain  a send timed out or its answer was unreadable: it may have landed
     ├── ChannelRevoked     the platform revoked our credentials: the channel stops for good
     └── FileTooLarge       an inbound file over the cap: refused before (or while) downloading

The inbox a channel hands messages to may raise `TryLater`: the message was not taken.

"Message is not modified" is not an error: a channel treats it as success.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from aiohttp import web

from adapters.live import Live
from content.blobs import BlobStore
from content.parts import BlobRef, MediaPart, Part, size_text


@dataclass(frozen=True, slots=True)
class ChatRef:
    """Where a conversation happens: one chat, optionally one thread inside it."""

    channel: str
    chat_id: str
    thread_id: str | None = None
    # The workspace or tenant (a Slack team), where a platform needs it to post; not in the key.
    team_id: str | None = field(default=None, compare=False)

    @property
    def key(self) -> str:
        """Stable conversation key: one agent session per (user, key)."""
        if self.thread_id:
            return f"{self.channel}:{self.chat_id}:{self.thread_id}"
        return f"{self.channel}:{self.chat_id}"


# the kinds whose recording is speech to transcribe, whatever media type it came in (a Telegram
# video note is an MP4 video)
VOICE_KINDS = frozenset({"voice", "audio", "video note"})


@dataclass(frozen=True, slots=True)
class Attachment:
    kind: str  # photo | document | voice | audio | video | video note | file
    name: str | None = None
    mime_type: str | None = None
    size: int | None = None
    url: str | None = None
    platform_id: str | None = None

    @property
    def spoken(self) -> bool:
        """A voice note (or any recording sent as audio): fetched, it becomes an audio part."""
        return self.kind in VOICE_KINDS


# The action ids of an approval request's buttons start so (bot/approvals/): a press answers
# the request and resumes its turn, whose message is not a reply to the press.
APPROVAL_ACTIONS = "approval."


@dataclass(frozen=True, slots=True)
class Action:
    """A button press or card action: its own kind of inbound, never parsed as a command."""

    action_id: str
    value: str | None = None
    label: str | None = None  # what the button said, when the platform tells us
    message_id: str | None = None  # the message that carried the button

    @property
    def answers_approval(self) -> bool:
        return self.action_id.startswith(APPROVAL_ACTIONS)

    def describe(self) -> str:
        """How the model reads it: what was pressed, and on which message."""
        what = f"“{self.label}”" if self.label else f"with id {self.action_id!r}"
        value = f" (value: {self.value!r})" if self.value is not None else ""
        return f"[The user pressed the button {what}{value}.]"


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """One user message, normalized from any platform."""

    chat: ChatRef
    user_id: str
    text: str
    event_id: str  # the platform's id for this event: claimed once, duplicates dropped
    message_id: str | None = None  # the platform's id of the message, for replies
    user_name: str | None = None
    is_group: bool = False
    mentioned: bool = False  # addressed to the bot (mention, reply to the bot, private chat)
    attachments: tuple[Attachment, ...] = ()  # as the platform announced them, not fetched
    parts: tuple[Part, ...] = ()  # media already in the blob store (fetched, or uploaded)
    action: Action | None = None  # set for a button press; `text` is then empty
    # The bot's name where a command can name its bot (Telegram's `/new@name`). None: the channel
    # has no other bots to address (web socket, terminal), so `/new@anything` is ours.
    bot_name: str | None = None
    # Who is behind the user where users are free to mint new ids: a web visitor's network
    # address (`address:<ip>`), a sessions API key (`key:<id>`). Quotas per client count it.
    client: str | None = None
    # The sender's language as the platform or the widget tells it (a BCP 47 tag such as
    # `de-AT`; None: not told). The gateway keeps it for the conversation and writes its own
    # texts in it (content/texts.py); before a command or a held message's handler sees the
    # message, it holds the conversation's language (bot/pipeline/language.py).
    language: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # When it reached us (time.monotonic()): time to placeholder and turn latency count from here.
    received_at: float = field(default_factory=time.monotonic, compare=False, repr=False)

    @property
    def conversation_key(self) -> str:
        return self.chat.key

    @property
    def command(self) -> str | None:
        """`/new` and `/new@<bot_name>` → `"new"`. None for anything else: plain text, an action,
        and a command addressed to another bot (`/new@other` where `bot_name` is known)."""
        if self.action is not None:
            return None
        text = self.text.strip()
        if not text.startswith("/") or len(text) < 2:
            return None
        word, _, target = text.split(maxsplit=1)[0][1:].partition("@")
        if target and self.bot_name is not None and target.lower() != self.bot_name.lower():
            return None
        return word.lower() or None


@dataclass(frozen=True, slots=True)
class OutboundContent:
    """What we show: text (markdown), plus optional structured display hints and media parts."""

    text: str
    display: tuple[Mapping[str, Any], ...] = ()
    parts: tuple[Part, ...] = ()
    # the final of a stopped answer: `text` is what it had shown, its last paragraph the
    # stopped mark; a channel that shows a stop itself (the web's `stopped: true`) says so
    stopped: bool = False
    # the turn's state in parts (previews and the final of a delivery; None elsewhere)
    live: Live | None = None


@dataclass(frozen=True, slots=True)
class MessageHandle:
    """A message we sent and may edit later; `data` is whatever the platform needs to edit it."""

    chat: ChatRef
    message_id: str
    data: Mapping[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class ChannelLimits:
    max_text_length: int = 4096
    min_edit_interval_s: float = 1.0
    # False: no placeholder and no previews; the final arrives as new message(s).
    can_edit: bool = True
    # Edits one message may take (Feishu: 20). Previews stop one short; the final still lands.
    max_edits_per_message: int | None = None
    # The final edit means something even with unchanged text (web: `message.completed`, Feishu:
    # the card's streaming mode turned off), so it is always sent; elsewhere an unchanged final is skipped rather than sent twice.
    final_marker: bool = False
    # The final message carries the answer's media parts itself (the web socket and the API
    # render them as links on `message.completed`); elsewhere each part is sent after the
    # final text, through `SendsParts.send_part`.
    parts_inline: bool = False
    # A message the conversation's full queue cannot take is refused in the channel's protocol
    # (the inbox raises `QueueOverflow`: an error frame, an HTTP status), not by a bot message:
    # a client then knows which message was refused, and no answer stream takes the notice
    # for the answer to the messages that are queued.
    refuses_in_protocol: bool = False

    def length(self, text: str) -> int:
        """Length as the platform measures it (overridden per channel when it differs)."""
        return len(text)


class ChannelError(Exception):
    """A send or edit the platform refused or could not take."""


class RateLimited(ChannelError):
    def __init__(self, retry_after: float, message: str = "rate limited") -> None:
        super().__init__(f"{message}; retry after {retry_after:.1f}s")
        self.retry_after = retry_after


class MessageGone(ChannelError):
    """The message to edit is gone; continue in a new message."""


class DeliveryUncertain(ChannelError):
    """A send may or may not have reached the platform: do not send it again."""


class ChannelRevoked(ChannelError):
    """The platform revoked the channel's credentials (an uninstalled app, a revoked token).

    Raised from `run()`, it stops the channel until the process restarts with new ones: retrying
    would only log the same refusal again. Other channels and the process go on."""


class FileTooLarge(ChannelError):
    """An inbound file over `limit` bytes (the blob store's cap, or the platform's own download
    cap where lower): refused from its declared size before any byte was downloaded, or as soon
    as the download passed the cap when the size was not declared (or was wrong). `reply` is
    what the user is told; the rest of the message is still answered."""

    def __init__(self, attachment: Attachment, limit: int, size: int | None = None) -> None:
        self.attachment, self.limit, self.size = attachment, limit, size
        super().__init__(self.reply)

    @property
    def reply(self) -> str:
        name = f" “{self.attachment.name}”" if self.attachment.name else ""
        size = f" ({size_text(self.size)})" if self.size is not None else ""
        return (
            f"The {self.attachment.kind}{name}{size} is too large: I can read files of up to "
            f"{size_text(self.limit)}. The rest of your message is answered without it."
        )


class TryLater(Exception):
    """The inbox could not take this message now (a shared store such as Redis is down) and kept
    nothing of it: the channel has the platform redeliver it (a webhook answers 5xx) or tells the
    client to send it again (the web socket), so it is neither lost nor answered twice."""


class QueueOverflow(Exception):
    """The conversation has its limit of messages waiting, so the inbox did not take this one
    (nothing claimed: a resend later is a new message). Raised only for channels whose limits
    set `refuses_in_protocol`; they refuse it in their own protocol (an error frame, an HTTP
    status). Elsewhere the gateway answers with a notice of its own."""


Inbox = Callable[[InboundMessage], Awaitable[None]]  # may raise TryLater, QueueOverflow


class Channel(Protocol):
    """A chat platform: runs until cancelled, handing each inbound message to `inbox`."""

    name: str

    def limits_for(self, chat: ChatRef) -> ChannelLimits: ...

    async def run(self, inbox: Inbox) -> None: ...

    async def send(
        self,
        chat: ChatRef,
        content: OutboundContent,
        *,
        reply_to: str | None = None,
        final: bool = False,
        recipient: str | None = None,
    ) -> MessageHandle:
        """Post a new message. `final=False` marks a placeholder that will be edited.

        `recipient` is the user being answered (with `chat.team_id`), for platforms whose
        posting calls need them (Slack's streaming calls); others ignore it.
        """
        ...

    async def edit(
        self, handle: MessageHandle, content: OutboundContent, *, final: bool = False
    ) -> None:
        """Replace the text of a message we sent; `final=True` for the last edit of a turn."""
        ...


@runtime_checkable
class WebRoutes(Protocol):
    """Optional: a channel that serves HTTP (a webhook, a socket, pages) on the shared web app."""

    def install(self, app: web.Application) -> None: ...


@runtime_checkable
class FetchesFiles(Protocol):
    """Optional: a channel that reads an inbound attachment's bytes into the blob store.

    The declared size is checked against `blobs.max_bytes` (and the platform's own download cap)
    before downloading, and the download itself stops at the cap: `FileTooLarge` either way.
    Other failures are `ChannelError`s. Platform URLs (which may hold a token) are never in the
    error or the log."""

    async def fetch(
        self, message: InboundMessage, attachment: Attachment, blobs: BlobStore
    ) -> BlobRef: ...


@runtime_checkable
class SendsParts(Protocol):
    """Optional: a channel that sends an image, a file or an audio part as itself (an upload,
    or a signed link where the client fetches it), with an optional caption, in `chat`'s thread."""

    async def send_part(
        self,
        chat: ChatRef,
        part: MediaPart,
        blobs: BlobStore,
        *,
        caption: str | None = None,
        reply_to: str | None = None,
    ) -> MessageHandle: ...


class BlobLinks(Protocol):
    """Signed, expiring links to blobs for a browser or an API client: the path (and query) of
    the route that serves the blob, under `name`, until the link expires."""

    def link(self, blob_id: str, name: str | None = None) -> str: ...


@runtime_checkable
class PlatformStatus(Protocol):
    """A channel that knows whether its platform has answered (Telegram's getMe, Slack's
    auth.test and Socket Mode, Feishu's token and long connection; the web socket trivially):
    readiness waits for that, not for a run to have lasted a while."""

    def platform_down(self) -> str | None:
        """None once the platform answered (and since its last failure); else why not, briefly."""
        ...


@runtime_checkable
class HealthReport(Protocol):
    """Optional: a channel's figures for `/healthz` (JSON-able, cheap to compute)."""

    def health(self) -> Mapping[str, Any]: ...


@runtime_checkable
class EventSink(Protocol):
    """Optional: a channel that shows turn status events itself (the web socket does)."""

    async def emit_event(self, chat: ChatRef, type: str, fields: Mapping[str, Any]) -> None: ...


@runtime_checkable
class NamesItsMessages(Protocol):
    """Optional: a channel whose message ids the gateway makes itself (the web socket, the
    sessions API). A placeholder's handle is known before it is posted, so the turn records it
    before the frame goes out: a process killed right after the user saw it leaves a handle
    the surviving process finishes the turn in, never a second placeholder."""

    def reserve(self, chat: ChatRef, reply_to: str | None) -> MessageHandle:
        """The handle the next message will have; nothing is shown yet."""
        ...

    async def post(self, handle: MessageHandle, content: OutboundContent) -> None:
        """Show the message `reserve` named (its `message.created`). Posting it again shows
        the same message (a resumed turn announces its placeholder again: the dead process
        may have died before it went out)."""
        ...


@runtime_checkable
class DropNotice(Protocol):
    """Optional: a channel that tells the sender of each message a `/stop` dropped from the
    queue that it will not be answered (the web socket's `message.dropped`)."""

    async def dropped(self, messages: Sequence[InboundMessage], reason: str) -> None: ...


class Leader(Protocol):
    """Elects one process for work only one receiver may do (Telegram's long polling)."""

    async def lead(self, name: str, work: Callable[[], Awaitable[None]]) -> None:
        """Run `work` while this process leads `name`, waiting its turn otherwise; until
        cancelled. `work` is cancelled when the lead is lost, and started again if regained."""
        ...
