"""The widget's pure functions under node: streaming markdown, status lines, images, icons."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

WIDGET = Path(__file__).resolve().parent.parent / "adapters" / "static" / "widget" / "markdown.js"
pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed"),
]


def widget(function: str, *calls: list[Any]) -> list[Any]:
    """`function(*args)` for each argument list, run by node on the widget's own code."""
    script = (
        f"const w = require({json.dumps(str(WIDGET))});"
        f"console.log(JSON.stringify({json.dumps(calls)}.map((a) => w.{function}(...a))));"
    )
    done = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, done.stderr
    result: list[Any] = json.loads(done.stdout)
    return result


def test_text_cut_mid_markup_shows_no_raw_marker() -> None:
    cut = [
        "Hello **bo",
        "see [the docs](https://exa",
        "see [the do",
        "an *emphas",
        "run `pip ins",
        "```python\nprint(1)",
        "done **bold** and *it* and `code`",
        "5 * 3 = 15",
    ]
    settled = widget("settleMarkdown", *[[text] for text in cut])
    assert settled[:5] == ["Hello bo", "see the docs", "see the do", "an emphas", "run pip ins"]
    assert settled[5] == "```python\nprint(1)\n```"  # an open code block is closed, not shown raw
    assert settled[6] == cut[6]  # complete markup is left alone
    assert settled[7] == cut[7]  # a lone star between spaces is not markup
    rendered = widget("renderMarkdown", *[[text] for text in settled[:5]])
    assert not [html for html in rendered if "*" in html or "[" in html or "`" in html]


def test_the_placeholders_status_lines_are_left_to_the_widgets_own() -> None:
    texts = [
        "Thinking…\n\n⏳ research — find the prices\n🔧 Getting the current date and time…",
        "Half an answer\n\n🔧 Checking the stock…",
        "An answer that mentions 🔧 inside a line stays",
    ]
    assert widget("withoutStatusLines", *[[text] for text in texts]) == [
        "Thinking…",
        "Half an answer",
        texts[2],
    ]


def test_remote_images_load_only_when_the_site_turns_them_on() -> None:
    image = "![chart](https://cdn.example/c.png) ![x](http://plain.example/x.png)"
    off, on = widget("renderMarkdown", [image], [image, {"images": True}])
    assert "<img" not in off and "[image: chart]" in off
    assert on.count("<img") == 1  # https only: a plain-http image stays text
    assert '<img src="https://cdn.example/c.png" alt="chart" referrerpolicy="no-referrer"' in on
    assert "[image: x]" in on


def test_the_servers_symbols_become_inline_svg_icons() -> None:
    [stopped, code] = widget("renderMarkdown", ["⏹ Stopped."], ["`⏹ in code`"])
    assert stopped.startswith('<svg class="cgw-icon"') and stopped.endswith("Stopped.")
    assert "⏹" not in stopped
    assert code == "<code>⏹ in code</code>"  # code is shown as written


def test_the_text_on_the_accent_colour_passes_wcag_aa() -> None:
    ratios = widget(
        "contrast", ["#1f5bd1", "#ffffff"], ["#0f766e", "#ffffff"], ["#1d2330", "#eef0f4"]
    )
    assert all(ratio >= 4.5 for ratio in ratios), ratios


def test_every_part_of_the_widget_is_served_and_the_whole_parses() -> None:
    from adapters.websocket.static import STATIC_DIR, WIDGET_PARTS, widget_script

    on_disk = sorted(path.name for path in (STATIC_DIR / "widget").glob("*.js"))
    assert sorted(WIDGET_PARTS) == on_disk  # a new file is served, not silently left out
    done = subprocess.run(
        ["node", "--check", "-"], input=widget_script().decode(), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_headings_lists_tables_and_quotes_render_as_blocks() -> None:
    answer = (
        "## Our plans\n\nWe offer:\n\n- **Basic**: email\n- Pro\n  - nested\n- Max\n\n"
        "3. third\n4. fourth\n\n| Plan | Price |\n|:--|--:|\n| Basic | 10 |\n| A \\| B | 2026-12-02 |\n\n"
        "> quoted *x*\n\n---\nend ~~old~~"
    )
    [html] = widget("renderMarkdown", [answer])
    assert html.startswith("<h2>Our plans</h2>We offer:<ul><li><strong>Basic</strong>: email</li>")
    assert "<li>Pro<ul><li>nested</li></ul></li><li>Max</li></ul>" in html
    assert '<ol start="3"><li>third</li><li>fourth</li></ol>' in html
    assert '<th style="text-align: left">Plan</th><th style="text-align: right">Price</th>' in html
    assert '<td style="text-align: left">A | B</td>' in html  # an escaped pipe stays in its cell
    assert '<span class="cgw-nowrap">2026-12-02</span>' in html  # a date does not wrap at "-"
    assert "<blockquote>quoted <em>x</em></blockquote><hr>end <del>old</del>" in html
    assert "#" not in html and "|--" not in html


def test_markup_inside_a_table_cell_or_heading_stays_text() -> None:
    attempts = [
        "| a | b |\n|---|---|\n| <script>alert(1)</script> | <img src=x onerror=alert(1)> |",
        '# <img src=x onerror="alert(1)">',
        '- <a href="javascript:alert(1)">x</a>\n- [y](javascript:alert(1))',
        '| x" style="color:red | y |\n|---|---|',
    ]
    rendered = widget("renderMarkdown", *[[text] for text in attempts])
    for html in rendered:
        assert "<script" not in html and "<img" not in html and '<a href="javascript' not in html
    assert "<td>&lt;script&gt;alert(1)&lt;/script&gt;</td>" in rendered[0]
    assert "<td>&lt;img src=x onerror=alert(1)&gt;</td>" in rendered[0]
    assert rendered[1] == "<h1>&lt;img src=x onerror=&quot;alert(1)&quot;&gt;</h1>"
    assert "<th>x&quot; style=&quot;color:red</th>" in rendered[3]


def test_text_that_only_looks_like_blocks_stays_a_paragraph() -> None:
    texts = ["5 * 3 = 15\n2 - 1 = 1", "#hashtag and a | pipe", "*not a list*"]
    rendered = widget("renderMarkdown", *[[text] for text in texts])
    assert rendered == ["5 * 3 = 15<br>2 - 1 = 1", "#hashtag and a | pipe", "<em>not a list</em>"]
