"""The Telegram channel's parts: markdown rendering and normalization."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest
from aiogram.types import Update

from adapters.telegram.normalize import BotIdentity, Unsupported, normalize, stop_press
from adapters.telegram.render import rendered_length, to_html, visible_text
from bot.pipeline.textsplit import split_text
from tests.telegram_fake import BOT, FakeBotAPI, _HtmlCheck

ME = BotIdentity(BOT["id"], BOT["username"])


# --- rendering ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("markdown", "html"),
    [
        (
            "**bold** *it* _it_ ~~gone~~ ||secret||",
            "<b>bold</b> <i>it</i> <i>it</i> <s>gone</s> <tg-spoiler>secret</tg-spoiler>",
        ),
        ("a < b & `x<y>`", "a &lt; b &amp; <code>x&lt;y&gt;</code>"),
        ("[docs](https://e.com/?a=1&b=2)", '<a href="https://e.com/?a=1&amp;b=2">docs</a>'),
        ("[x](javascript:alert(1))", "[x](javascript:alert(1))"),
        ("# Title\n- one\n> quoted", "<b>Title</b>\n• one\n<blockquote>quoted</blockquote>"),
        (
            "```py\nif a < b:\n    pass\n```",
            '<pre><code class="language-py">if a &lt; b:\n    pass</code></pre>',
        ),
        # CommonMark (and GitHub) read 2*3*4 as 2<i>3</i>4: `*` may open inside a word, which
        # Chinese and Japanese bold needs (这是**重要**的). Spaced arithmetic stays literal.
        ("snake_case and 2 * 3 * 4 and **open", "snake_case and 2 * 3 * 4 and **open"),
        ("这是**重要**的", "这是<b>重要</b>的"),
    ],
)
def test_markdown_to_telegram_html(markdown: str, html: str) -> None:
    assert to_html(markdown) == html


@pytest.mark.parametrize("cut", range(0, 120, 7))
def test_any_cut_of_a_stream_renders_to_html_telegram_accepts(cut: int) -> None:
    text = "Intro **bold _and it_** `co*de` [l](https://x.y)\n```python\nx = '<b>'\n```\n> q *i*"
    rendered = to_html(text[:cut] or "x")
    assert _HtmlCheck.visible(rendered) == visible_text(rendered)


def test_length_is_the_rendered_text_in_utf16_units() -> None:
    assert rendered_length("**😀**") == 2
    assert rendered_length("[a link](https://example.com/" + "x" * 500 + ")") == 6


def test_rendering_never_lengthens_text() -> None:
    pieces = [
        "**",
        "*",
        "_",
        "__",
        "~~",
        "||",
        "`",
        "```",
        "```py",
        "[a](https://x.y)",
        "[](https://x.y)",
        "# ",
        "- ",
        "> ",
        "---",
        "\n",
        " ",
        "word",
        "&",
        "<",
        "😀",
        "![i](https://x.y/i.png)",
    ]
    rng = random.Random(5)
    for _ in range(2000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 30)))
        assert rendered_length(text) <= len(text.encode("utf-16-le")) // 2, text


def test_split_by_rendered_length_never_overflows_when_markup_is_cut_open() -> None:
    link = "[see this](https://example.com/" + "p" * 300 + ")"
    text = " ".join(["word"] * 300 + [link] * 3 + ["word"] * 300)
    for chunk in split_text(text, 1000, rendered_length):
        assert rendered_length(chunk) <= 1000


@pytest.mark.parametrize("unit", ["||a", "[a", "![", "[a](", " __a", "**a", "~~a ", "a\n"])
def test_a_long_line_of_unclosed_markers_renders_in_linear_time(unit: str) -> None:
    def seconds(size: int, tries: int) -> float:
        line = (unit * (size // len(unit) + 1))[:size]
        best = float("inf")
        for _ in range(tries):
            started = time.thread_time()  # CPU time: other processes' load does not count
            rendered = to_html(line)
            best = min(best, time.thread_time() - started)
        assert _HtmlCheck.visible(rendered) == visible_text(rendered)
        return best

    # 8 times the text costs about 8 times the time when linear, 64 times when quadratic.
    # A ratio of CPU times holds on a busy machine, where an absolute time does not.
    small, large = seconds(1_000, 3), seconds(8_000, 2)
    assert large < 24 * small + 0.05, (
        f"{large:.2f} s for 8,000 characters of {unit!r} against {small:.3f} s for 1,000: "
        "quadratic again?"
    )


def test_spans_and_links_keep_rendering_around_stray_brackets() -> None:
    assert to_html("[x [docs](https://e.com) **b**") == (
        '[x <a href="https://e.com">docs</a> <b>b</b>'
    )


# --- normalization --------------------------------------------------------------------------


def _message(fake: FakeBotAPI, chat: int, text: str | None, **extra: Any) -> tuple[Any, int]:
    update = Update.model_validate(fake.message(chat, text, **extra))
    assert update.message is not None
    return update.message, update.update_id


def test_private_message() -> None:
    fake = FakeBotAPI()
    message, update_id = _message(fake, 42, "hello")
    inbound = normalize(message, update_id, ME)
    assert inbound is not None and not isinstance(inbound, Unsupported)
    assert (inbound.chat.key, inbound.user_id, inbound.text) == ("telegram:42", "42", "hello")
    assert (
        inbound.event_id == f"telegram:{update_id}" and inbound.mentioned and not inbound.is_group
    )


@pytest.mark.parametrize(
    ("text", "entities", "mentioned"),
    [
        ("chatting", None, False),
        ("hi @test_bot", [{"type": "mention", "offset": 3, "length": 9}], True),
        (
            "😀 hi @TEST_BOT",
            [{"type": "mention", "offset": 6, "length": 9}],
            True,
        ),  # UTF-16 offsets
        ("hi @other_bot", [{"type": "mention", "offset": 3, "length": 10}], False),
        ("hi Bot", [{"type": "text_mention", "offset": 3, "length": 3, "user": BOT}], True),
        ("/new", [{"type": "bot_command", "offset": 0, "length": 4}], True),
        ("/weather", [{"type": "bot_command", "offset": 0, "length": 8}], False),
    ],
)
def test_mentions_in_groups(
    text: str, entities: list[dict[str, Any]] | None, mentioned: bool
) -> None:
    message, update_id = _message(FakeBotAPI(), -100, text, entities=entities)
    inbound = normalize(message, update_id, ME)
    assert inbound is not None and not isinstance(inbound, Unsupported)
    assert inbound.is_group and inbound.mentioned is mentioned


def test_reply_to_the_bot_in_a_forum_topic() -> None:
    ours = {
        "message_id": 9,
        "date": 0,
        "chat": {"id": -100, "type": "supergroup"},
        "from": BOT,
        "text": "hi",
    }
    message, update_id = _message(FakeBotAPI(), -100, "thanks", thread_id=7, reply_to=ours)
    inbound = normalize(message, update_id, ME)
    assert inbound is not None and not isinstance(inbound, Unsupported)
    assert (
        inbound.mentioned
        and inbound.chat.thread_id == "7"
        and inbound.chat.key == "telegram:-100:7"
    )


def test_documents_voice_and_what_is_ignored() -> None:
    fake = FakeBotAPI()
    document = {
        "file_id": "d",
        "file_unique_id": "d",
        "file_name": "a.pdf",
        "mime_type": "application/pdf",
        "file_size": 10,
    }
    message, update_id = _message(fake, 42, None, document=document, caption="read this")
    inbound = normalize(message, update_id, ME)
    assert inbound is not None and not isinstance(inbound, Unsupported)
    [attachment] = inbound.attachments
    assert (attachment.kind, attachment.name, attachment.mime_type, inbound.text) == (
        "document",
        "a.pdf",
        "application/pdf",
        "read this",
    )
    voice = {"file_id": "v", "file_unique_id": "v", "duration": 3, "mime_type": "audio/ogg"}
    message, update_id = _message(fake, 42, None, voice=voice)
    inbound = normalize(message, update_id, ME)
    assert inbound is not None and not isinstance(inbound, Unsupported)
    assert inbound.attachments[0].kind == "voice" and inbound.text == ""
    message, update_id = _message(fake, -100, None, new_chat_title="renamed")
    assert normalize(message, update_id, ME) is None  # a service message
    location = {"latitude": 1.0, "longitude": 2.0}
    message, update_id = _message(fake, -100, None, location=location)
    assert normalize(message, update_id, ME) is None  # not addressed to us in a group
    message, update_id = _message(fake, 42, None, location=location)
    assert isinstance(normalize(message, update_id, ME), Unsupported)


def test_a_private_chat_topic_is_its_own_conversation() -> None:
    """Bot API 9.3+: topics in a user's chat with the bot, each its own conversation; the stop
    button of a draft in one is that user's /stop there."""
    fake = FakeBotAPI()
    keys = set()
    for thread in (7, 8, None):
        message, update_id = _message(fake, 42, "hi", thread_id=thread)
        inbound = normalize(message, update_id, ME)
        assert inbound is not None and not isinstance(inbound, Unsupported)
        assert not inbound.is_group and inbound.user_id == "42"
        keys.add(inbound.chat.key)
    assert keys == {"telegram:42:7", "telegram:42:8", "telegram:42"}
    update = Update.model_validate(fake.stop_press(42, 5, thread_id=7))
    assert update.stopped_message_generation is not None
    stop = stop_press(update.stopped_message_generation, update.update_id, ME)
    assert (stop.chat.key, stop.user_id, stop.text, stop.command) == (
        "telegram:42:7",
        "42",
        "/stop",
        "stop",
    )
    assert stop.event_id == f"telegram:{update.update_id}" and stop.mentioned
