"""Media parts through the pipeline: an inbound photo and PDF reach the model as the user
message's parts and the store keeps them (a second process reads them back), a tool's chart
reaches the final answer, the Redis queue carries parts, and the transcript replays them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from adapters.base import (
    Attachment,
    ChannelError,
    ChannelLimits,
    ChatRef,
    InboundMessage,
    MessageHandle,
    OutboundContent,
)
from agent.history import IMAGE_TOKENS, estimate_tokens
from agent.providers.scripted import Reply, ScriptedProvider
from agent.replay import replay_point
from agent.types import Message, ToolCall
from bot.pipeline.transcript import StoreHistory
from bot.redis import messages
from bot.runtime.app import App
from content.blobs import BlobStore
from content.parts import AudioPart, BlobRef, FilePart, ImagePart, MediaPart, Part, part_to_json
from tests.conftest import make_config
from tests.fakes import Call, RecordingChannel
from tools.base import ToolContext, ToolResult
from tools.registry import ToolRegistry
from tools.tool import tool

CHAT = ChatRef("fake", "dm-1")
PHOTO = BlobRef("a" * 64, "image/jpeg", 48_213, "IMG_0042.jpg", "fake")
PDF = BlobRef("b" * 64, "application/pdf", 120_400, "invoice.pdf", "fake")
CHART_PNG = b"\x89PNG\r\n\x1a\n chart bytes"
PERSONA = "---\nname: default\ndescription: draws charts\ntools: [chart]\n---\nYou draw.\n"


class MediaChannel(RecordingChannel):
    """Records the media each message went out with, beside its text (it shows them inline,
    as the web socket does)."""

    def __init__(self) -> None:
        super().__init__(ChannelLimits(100, 0.05, parts_inline=True))
        self.media: list[tuple[Part, ...]] = []

    async def send(
        self,
        chat: ChatRef,
        content: OutboundContent,
        *,
        reply_to: str | None = None,
        final: bool = False,
        recipient: str | None = None,
    ) -> MessageHandle:
        self.media.append(content.parts)
        return await super().send(chat, content, reply_to=reply_to, final=final)

    async def edit(
        self, handle: MessageHandle, content: OutboundContent, *, final: bool = False
    ) -> None:
        self.media.append(content.parts)
        await super().edit(handle, content, final=final)


class UploadingChannel(RecordingChannel):
    """Sends each part as a message of its own after the answer (as Telegram does); a part
    named `broken.png` the platform refuses."""

    def __init__(self) -> None:
        super().__init__()
        self.uploaded: list[tuple[str, bytes, str | None]] = []

    async def send_part(
        self,
        chat: ChatRef,
        part: MediaPart,
        blobs: BlobStore,
        *,
        caption: str | None = None,
        reply_to: str | None = None,
    ) -> MessageHandle:
        if part.blob.name == "broken.png":
            raise ChannelError("Bad Request: IMAGE_PROCESS_FAILED")
        _, data = await blobs.get(part.blob.blob_id)
        self.uploaded.append((part.type, data, reply_to))
        self._record(Call("send", f"p{len(self.uploaded)}", f"[{part.blob.name}]", True))
        return MessageHandle(chat, f"p{len(self.uploaded)}")


def chart_registry(made: list[BlobRef], blobs: Callable[[], App]) -> ToolRegistry:
    @tool
    async def chart(ctx: ToolContext, title: str) -> ToolResult:
        """Draw a chart.

        Args:
            title: what the chart shows
        """
        ref = await blobs().blobs.put(CHART_PNG, mime_type="image/png", name=f"{title}.png")
        made.append(ref)
        return ToolResult(f"drew {title}", parts=(ImagePart(ref),))

    return ToolRegistry([chart])


Start = Callable[[ScriptedProvider, ToolRegistry | None], "AsyncIterator[App]"]


@pytest.fixture
async def apps(tmp_path: Path) -> AsyncIterator[Callable[..., object]]:
    """`app, channel = await start(provider, registry)`: a gateway "process" on one database."""
    async with AsyncExitStack() as stack:

        async def start(
            provider: ScriptedProvider,
            registry: ToolRegistry | None = None,
            channel: RecordingChannel | None = None,
        ) -> tuple[App, RecordingChannel]:
            channel = channel or MediaChannel()
            folder = tmp_path / "personas"
            folder.mkdir(exist_ok=True)
            (folder / "default.md").write_text(PERSONA)
            app = App(
                make_config(tmp_path, personas={"dirs": [str(folder)]}),
                base_dir=tmp_path,
                provider=provider,
                registry=registry,
                channels=[channel],
                web_server=False,
            )
            await stack.enter_async_context(app)
            return app, channel

        yield start


def message(text: str, event: str, parts: tuple[Part, ...] = ()) -> InboundMessage:
    return InboundMessage(CHAT, "u1", text, event, f"m-{event}", parts=parts)


async def test_media_reach_the_model_the_store_and_the_answer(
    apps: Callable[..., object],
) -> None:
    made: list[BlobRef] = []
    holder: list[App] = []
    provider = ScriptedProvider([Reply(calls=[("chart", {"title": "sales"})]), Reply("Here.")])
    app, channel = await apps(provider, chart_registry(made, lambda: holder[0]))  # type: ignore[misc]
    holder.append(app)
    sent = (ImagePart(PHOTO), FilePart(PDF))
    await app.gateway.handle(message("what is on these?", "e1", sent))
    await app.gateway.wait_idle()

    user = provider.requests[0].messages[-1]
    assert (user.role, user.content, user.parts) == ("user", "what is on these?", sent)
    tool_result = provider.requests[1].messages[-1]
    assert tool_result.role == "tool" and tool_result.parts == (ImagePart(made[0]),)
    assert channel.shown()[-1] == "Here."
    assert channel.media[-1] == (ImagePart(made[0]),)  # the final answer carries the chart
    assert all(not parts for parts in channel.media[:-1])  # previews carry none

    # another process reads the history from the database: the parts come back from it
    later = ScriptedProvider([Reply("A photo and an invoice.")])
    other, _ = await apps(later)  # type: ignore[misc]
    await other.gateway.handle(message("and again?", "e2"))
    await other.gateway.wait_idle()
    history = later.requests[0].messages
    assert [m.parts for m in history] == [sent, (), (ImagePart(made[0]),), (), ()]

    shown = await StoreHistory(other.store, lambda: "default").recent(CHAT, "u1")
    assert [(m.role, m.text, m.parts) for m in shown] == [
        ("user", "what is on these?", sent),
        ("assistant", "Here.", (ImagePart(made[0]),)),  # with the chart it went out with
        ("user", "and again?", ()),
        ("assistant", "A photo and an invoice.", ()),
    ]


async def test_a_channel_that_uploads_gets_the_media_after_the_text_and_says_what_failed(
    apps: Callable[..., object],
) -> None:
    made: list[BlobRef] = []
    holder: list[App] = []
    calls = [("chart", {"title": "sales"}), ("chart", {"title": "broken"})]
    provider = ScriptedProvider([Reply(calls=calls), Reply("Two charts.")])
    channel = UploadingChannel()
    app, _ = await apps(provider, chart_registry(made, lambda: holder[0]), channel)  # type: ignore[misc]
    holder.append(app)
    await app.gateway.handle(message("charts please", "e1"))
    await app.gateway.wait_idle()
    assert channel.uploaded == [("image", CHART_PNG, "m-e1")]  # in the thread of the question
    assert channel.shown() == [
        "Two charts.",
        "[sales.png]",
        "(The image “broken.png” could not be sent.)",
    ]


async def test_a_message_of_media_alone_is_answered(apps: Callable[..., object]) -> None:
    provider = ScriptedProvider([Reply("Nice photo.")])
    app, channel = await apps(provider)  # type: ignore[misc]
    await app.gateway.handle(message("", "e1", (ImagePart(PHOTO),)))
    await app.gateway.wait_idle()
    assert provider.requests[0].messages[-1].parts == (ImagePart(PHOTO),)
    assert channel.shown() == ["Nice photo."]


async def test_a_text_only_turn_carries_no_parts(apps: Callable[..., object]) -> None:
    provider = ScriptedProvider([Reply("Hi.")])
    app, channel = await apps(provider)  # type: ignore[misc]
    await app.gateway.handle(message("hello", "e1"))
    await app.gateway.wait_idle()
    assert provider.requests[0].messages[-1] == Message("user", "hello")
    assert channel.media and not any(channel.media)


def test_the_queue_encoding_carries_parts() -> None:
    voice = AudioPart(BlobRef("c" * 64, "audio/ogg", 9_000, None, "telegram"), "hi there")
    sent = InboundMessage(
        CHAT,
        "u1",
        "see attached",
        "e1",
        "m1",
        attachments=(Attachment("document", "application/pdf", "invoice.pdf"),),
        parts=(ImagePart(PHOTO), FilePart(PDF), voice),
    )
    assert messages.load(messages.dump(sent)) == sent
    plain = InboundMessage(CHAT, "u1", "hello", "e2", "m2")
    assert messages.load(messages.dump(plain)) == plain
    # queued by a process of the version before parts: none
    older = messages.dump(plain).replace(',"parts":[]', "")
    assert '"parts"' not in older and messages.load(older) == plain
    # queued by a newer version, with fields this one does not know: they are dropped
    newer = json.loads(messages.dump(sent))
    newer |= {"topic": 7, "chat": newer["chat"] | {"guest": True}}
    newer["attachments"][0]["duration_s"] = 3
    assert messages.load(json.dumps(newer)) == sent


def test_a_replayed_turn_keeps_the_media_of_its_results() -> None:
    """A result found only in the audit log comes back with its media, and the answer of a
    resumed turn carries every result's media (agent/replay.py)."""
    chart = ImagePart(BlobRef("d" * 64, "image/png", 310, "sales.png", "tool:chart"))
    calls = (ToolCall("c1", "chart", "{}"), ToolCall("c2", "chart", "{}"))
    own = [
        Message("user", "charts", parts=(FilePart(PDF),)),
        Message("assistant", "", tool_calls=calls),
        Message("tool", "drew", tool_call_id="c1", name="chart", parts=(chart,)),
    ]
    audit = [
        {"call_id": "c1", "result": "drew", "ok": 1, "extra": {"parts": [part_to_json(chart)]}},
        {"call_id": "c2", "result": "drew", "ok": 1, "extra": {"parts": [part_to_json(chart)]}},
    ]
    point = replay_point(own, audit, ToolRegistry([]), {"chart"})
    assert point.messages[0].parts == (FilePart(PDF),)
    assert [m.parts for m in point.recovered] == [(chart,)]
    assert point.resumed is not None and point.resumed.parts == (chart, chart)
    answered = [*point.messages, Message("assistant", "Two charts.")]
    done = replay_point(answered, audit, ToolRegistry([]), set())
    assert (done.final, done.parts) == ("Two charts.", (chart, chart))


def test_an_image_counts_in_the_history_budget() -> None:
    text = Message("user", "x" * 400)
    assert estimate_tokens(Message("user", "x" * 400, parts=(ImagePart(PHOTO),))) == (
        estimate_tokens(text) + IMAGE_TOKENS
    )
    with_file = estimate_tokens(Message("user", "x" * 400, parts=(FilePart(PDF),)))
    assert estimate_tokens(text) < with_file < estimate_tokens(text) + IMAGE_TOKENS
