"""The shared markdown parse and the renderer base every channel maps from."""

from __future__ import annotations

import random

import pytest

from adapters.markdown import Renderer, grid, may_lengthen, parse
from adapters.markdown_parts import stretches


class Brackets(Renderer):
    """A channel in miniature: shows that a subclass writes only its mapping."""

    def strong(self, inner: str) -> str:
        return f"[b:{inner}]"

    def em(self, inner: str) -> str:
        return f"[i:{inner}]"

    def spoiler(self, inner: str) -> str:
        return f"[hidden:{inner}]"

    def link(self, inner: str, url: str) -> str:
        return f"[{inner}->{url}]"

    def blockquote(self, inner: str) -> str:
        return f"[quote:{inner}]"


PLAIN = Renderer()


@pytest.mark.parametrize(
    ("markdown", "plain"),
    [
        ("**bold** and _it_ ~~gone~~ ||hidden||", "bold and it gone hidden"),
        ("# Title\n\nText\nnext line", "Title\n\nText\nnext line"),
        ("- a\n- b\n\n- c", "• a\n• b\n\n• c"),
        ("3. three\n4) four", "3. three\n4) four"),  # as written: never recounted, never longer
        ("- a\n  - b\n    1. c\n\n  more of a", "• a\n  • b\n    1. c\n\n  more of a"),
        ("- - nested on one line", "• • nested on one line"),
        ("-", "•"),
        ("> quoted\n>\n> two", "quoted\n\ntwo"),
        ("a\n\n---\n\nb", "a\n\n───\n\nb"),
        ("```sh\necho 1\n```\nafter", "echo 1\nafter"),
        ("    indented code", "indented code"),
        ("<b>raw</b> &amp; &#128512;", "<b>raw</b> & 😀"),
        ("[label](https://x.y) [](https://z.w) ![alt](https://i.png)", "label https://z.w alt"),
        ("a || b ||| c |", "a || b ||| c |"),  # pipes that pair up as nothing stay text
    ],
)
def test_the_default_rendering_is_the_visible_text(markdown: str, plain: str) -> None:
    assert PLAIN.render(markdown) == plain


def test_a_subclass_maps_only_what_its_markup_has() -> None:
    rendered = Brackets().render("> **a [link *x*](https://e.com)** ||s|| `c`\n\n- *i*")
    assert rendered == "[quote:[b:a [link [i:x]->https://e.com]] [hidden:s] c]\n\n• [i:i]"


def test_spoilers_nest_with_other_spans_and_pair_inside_links() -> None:
    assert Brackets().render("||**a**|| [||b||](https://e.com)") == (
        "[hidden:[b:a]] [[hidden:b]->https://e.com]"
    )


def test_a_table_is_a_grid_of_plain_cells_padded_for_wide_characters() -> None:
    markdown = "| name | 城市 |\n|---|--:|\n| **Ann** | [Paris](https://p.fr) |\n| 李 | `x` |"
    assert PLAIN.render(markdown) == ("name | 城市\n-----+------\nAnn  | Paris\n李   | x")
    assert grid([["a", "b"], ["", ""]]) == "a | b\n--+--\n  |"
    assert may_lengthen(markdown)


def test_unsafe_links_are_never_links() -> None:
    # markdown-it refuses these schemes outright: the markdown stays as written.
    tree = parse("[x](javascript:alert(1)) [y](vbscript:z) [z](data:text/html,1)")
    assert [node.type for node in tree.walk()].count("link") == 0


def test_rendering_never_lengthens_what_has_no_table() -> None:
    pieces = ["**", "_", "||", "`", "```", "- ", "1. ", "> ", "\n", "\n\n", "  ", "\t", "#"]
    pieces += ["word", "中文", "😀", "&amp;", "[a](https://x.y)", "<https://a.b>", "***", "\\"]
    rng = random.Random(7)
    for _ in range(1000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 30)))
        assert len(PLAIN.render(text)) <= len(text), text


def test_stretches_cut_only_where_no_later_line_can_reach_back() -> None:
    text = "para\n\n```\ncode\n\nstill code\n```\n\n- a\n\n  b\n\n- c\nlazy\n\nend"
    assert stretches(text) == [
        "para\n\n",
        "```\ncode\n\nstill code\n```\n\n",
        "- a\n\n  b\n\n",
        "- c\nlazy\n\n",
        "end",
    ]
    assert "".join(stretches(text)) == text
    # A fence indented as in a numbered item may be in it, or at the top level: both are followed.
    text = "1. Install:\n   ```sh\n   pip x\n\n   ```\n\nRun"
    assert stretches(text) == ["1. Install:\n   ```sh\n   pip x\n\n   ```\n\n", "Run"]
    text = "1. Install:\n   ```sh\n   pip x\n\nnot code\n   ```\n\nRun"  # "   ```" opens
    assert stretches(text) == [text]
    assert stretches("[a][r]\n\n[r]: https://x.y") == ["[a][r]\n\n[r]: https://x.y"]
    assert PLAIN.render("[a][r]\n\n[r]: https://x.y") == "a"


def test_rendering_by_stretches_is_rendering_the_whole() -> None:
    pieces = ["**", "_", "||", "`", "```", "~~~", "- ", "1. ", "2) ", "> ", ">", "\n", "\n\n"]
    pieces += ["  ", "    ", "\t", "# ", "word", "|a|b|", "|-|-|", "---", "===", "[a](https://x.y)"]
    rng = random.Random(3)
    for _ in range(1000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 40)))
        whole = Renderer()._blocks(parse(text).children, text.split("\n"), "")
        assert Renderer().render(text) == whole, text


def test_a_stream_reuses_the_stretches_it_rendered() -> None:
    parsed: list[str] = []

    class Counting(Renderer):
        def text(self, text: str) -> str:
            parsed.append(text)
            return text

    counting = Counting()
    counting.render("one\n\ntwo\n\nthr")
    parsed.clear()
    assert counting.render("one\n\ntwo\n\nthree") == "one\n\ntwo\n\nthree"
    assert parsed == ["three"]  # the finished stretches came from the cache
