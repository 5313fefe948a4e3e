"""Splitting long answers for channels with a length limit."""

from bot.pipeline.textsplit import split_text, utf16_length


def test_short_text_is_one_chunk() -> None:
    assert split_text("hello", 10) == ["hello"]


def test_splits_at_word_ends_and_keeps_every_word() -> None:
    text = " ".join(f"w{i}" for i in range(3000))
    chunks = split_text(text, 4096)
    assert all(len(c) <= 4096 for c in chunks)
    assert " ".join(chunks).split() == text.split()


def test_prefers_paragraph_ends() -> None:
    text = "a" * 60 + "\n\n" + "b" * 60
    assert split_text(text, 100) == ["a" * 60, "b" * 60]


def test_code_block_moves_whole_to_the_next_message() -> None:
    code = "```\n" + "x = 1\n" * 10 + "```"
    text = "intro " * 10 + "\n" + code
    chunks = split_text(text, 100)
    assert chunks[1].startswith("```") and chunks[1].count("```") == 2


def test_code_block_too_long_is_closed_and_reopened() -> None:
    text = "```\n" + "line of code\n" * 40 + "```"
    chunks = split_text(text, 100)
    assert all(c.count("```") % 2 == 0 for c in chunks)
    assert all(len(c) <= 100 for c in chunks)


def test_measures_in_utf16_units() -> None:
    text = "😀" * 5000  # two UTF-16 units each
    chunks = split_text(text, 4096, utf16_length)
    assert all(utf16_length(c) <= 4096 for c in chunks)
    assert "".join(chunks) == text
