"""Telegram's renderer on the shared markdown parse: HTML the Bot API accepts, lengths it counts."""

from __future__ import annotations

import random

import pytest

from adapters.markdown import Renderer
from adapters.telegram.render import rendered_length, to_html, visible_text
from tests.telegram_fake import _HtmlCheck


@pytest.mark.parametrize(
    ("markdown", "html"),
    [
        (
            "<b>hi</b> <script>x()</script>",
            "&lt;b&gt;hi&lt;/b&gt; &lt;script&gt;x()&lt;/script&gt;",
        ),
        ("<div>\nblock\n</div>", "&lt;div&gt;\nblock\n&lt;/div&gt;"),
        ("say \"hi\" & 'bye'", "say \"hi\" &amp; 'bye'"),  # only &lt; &gt; &amp; in text
        ("[f](ftp://x.y) [r](/relative) [j](javascript:x)", "f r [j](javascript:x)"),
        ('[q](https://e.com/?q="x")', '<a href="https://e.com/?q=%22x%22">q</a>'),
        (
            "<tg://resolve?domain=x> <me@e.com>",
            '<a href="tg://resolve?domain=x">tg://resolve?domain=x</a> <a href="mailto:me@e.com">me@e.com</a>',
        ),
        (
            "[**bold _and it_** ~~s~~](https://e.com)",
            '<a href="https://e.com"><b>bold <i>and it</i></b> <s>s</s></a>',
        ),
        ("![chart](https://e.com/c.png)", '<a href="https://e.com/c.png">chart</a>'),
        (
            "| a | b |\n|---|---|\n| <x> | **y** |",
            "<pre>a   | b\n----+--\n&lt;x&gt; | y</pre>",
        ),
        ("> outer\n> > inner", "<blockquote>outer\ninner</blockquote>"),  # quotes cannot nest
        ('```evil"lang\nx\n```', "<pre>x</pre>"),
        ("## Heading *it*\n***", "<b>Heading <i>it</i></b>\n───"),
        ("1. one\n2. two", "1. one\n2. two"),
    ],
)
def test_markdown_to_telegram_html(markdown: str, html: str) -> None:
    assert to_html(markdown) == html
    assert _HtmlCheck.visible(html) == visible_text(html)


@pytest.mark.parametrize(
    ("streamed", "html"),
    [
        (
            "Look:\n```python\nif a < b:\n    pr",
            'Look:\n<pre><code class="language-python">if a &lt; b:\n    pr</code></pre>',
        ),
        ("Look:\n```", "Look:"),
        ("so **this is import", "so **this is import"),
        ("see [the docs](https://e.co", "see [the docs](https://e.co"),
        ("| a | b |\n|---|-", "<pre>a | b\n--+--</pre>"),  # a header alone is a table
    ],
)
def test_a_half_written_stream_renders_to_valid_html(streamed: str, html: str) -> None:
    assert to_html(streamed) == html
    _HtmlCheck.visible(html)


def test_length_counts_utf16_units_of_the_visible_text() -> None:
    assert rendered_length("😀") == 2  # outside the BMP: a surrogate pair
    assert rendered_length("**中文**") == 2  # CJK is one unit each
    assert rendered_length("👨‍👩‍👧 ok") == 11  # a family: 3 pairs and 2 joiners
    assert rendered_length("[😀](https://e.com)") == 2
    assert rendered_length("`中😀`", limit=4096) == len("`中😀`".encode("utf-16-le")) // 2


def test_a_table_is_measured_rendered_even_under_the_limit() -> None:
    table = "|a|b|\n|-|-|\n|long cell|x|"
    assert rendered_length(table, limit=4096) == len(visible_text(to_html(table))) > len(table)


def test_the_html_without_its_tags_is_the_plain_rendering() -> None:
    """rendered_length measures the plain rendering: it must be what Telegram shows."""
    pieces = ["**", "*", "_", "~~", "||", "|", "`", "```", "```py", "[a](https://x.y)", "[b](/r)"]
    pieces += ["# ", "- ", "1. ", "> ", ">", "---", "|-|-|", "\n", "\n\n", " ", "    ", "word"]
    pieces += ["中文", "&", "<", "<b>", "😀", "![i](https://x.y/i.png)", "<https://a.b>", "\\*"]
    plain = Renderer()
    rng = random.Random(11)
    for _ in range(1000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 30)))
        html = to_html(text)
        assert _HtmlCheck.visible(html) == visible_text(html) == plain.render(text), text
