"""Content parts: the JSON form round-trips, bad forms are refused by name, media are described."""

from typing import Any

import pytest

from content.parts import (
    AudioPart,
    BlobRef,
    FilePart,
    ImagePart,
    PartError,
    TextPart,
    describe,
    media_part,
    part_from_json,
    part_to_json,
    parts_from_json,
    parts_to_json,
    size_text,
)

BLOB = BlobRef("ab" * 32, "image/png", 2048, "chart.png", "tool:make_chart")


def test_every_part_round_trips_through_json() -> None:
    parts = (
        TextPart("hello"),
        ImagePart(BLOB),
        FilePart(BlobRef("cd" * 32, "application/pdf", 10, None, None)),
        AudioPart(BlobRef("ef" * 32, "audio/ogg", 5_000_000, "voice.ogg", "telegram"), "hi"),
    )
    assert parts_from_json(parts_to_json(parts)) == parts
    assert parts_to_json(()) is None and parts_from_json(None) == ()


def test_a_text_only_json_form_has_no_blob_fields() -> None:
    assert part_to_json(TextPart("x")) == {"type": "text", "text": "x"}
    assert "transcript" not in part_to_json(AudioPart(BLOB))


@pytest.mark.parametrize(
    ("value", "names"),
    [
        ({"type": "video", "blob_id": "x"}, "unknown part type"),
        ({"type": "image", "mime_type": "image/png", "size": 1}, "blob_id"),
        ({"type": "file", "blob_id": "x", "mime_type": "pdf", "size": 1}, "mime_type"),
        ({"type": "audio", "blob_id": "x", "mime_type": "audio/ogg", "size": -1}, "size"),
        ({"type": "text"}, "text"),
        ({"type": {"nested": 1}}, "unknown part type"),  # a client's frame may hold anything
        (["image"], "JSON object"),
    ],
)
def test_a_bad_part_is_refused_naming_the_field(value: Any, names: str) -> None:
    with pytest.raises(PartError, match=names):
        part_from_json(value)


def test_media_part_follows_the_media_type() -> None:
    assert isinstance(media_part(BLOB), ImagePart)
    assert isinstance(media_part(BlobRef("x", "audio/mpeg", 1)), AudioPart)
    assert isinstance(media_part(BlobRef("x", "application/pdf", 1)), FilePart)


def test_a_text_only_model_reads_a_description() -> None:
    assert describe(ImagePart(BLOB)) == "[image 'chart.png': image/png, 2 KB]"
    voice = AudioPart(BlobRef("x", "audio/ogg", 3_000_000), "call me")
    assert (
        describe(voice)
        == "[audio: audio/ogg, 3.0 MB] (spoken; transcribed by speech-to-text:) call me"
    )


def test_sizes_read_as_the_limit_was_written() -> None:
    """Decimal units, as `media.max_bytes` and the widget count; a whole number of MiB (Telegram's
    `getFile` cap) in its own, so the 20 MB cap never reads "21.0 MB"."""
    assert [size_text(n) for n in (0, 512, 60_000, 376_400, 25_000_000, 20 * 2**20)] == [
        "0 B",
        "512 B",
        "60 KB",
        "376 KB",
        "25.0 MB",
        "20 MB",
    ]
