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
