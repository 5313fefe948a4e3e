"""content/images.py on its own: what it keeps as it is, what it converts, a byte cap held by
re-encoding, the upright size read from the header alone, and what it refuses to decode."""

from __future__ import annotations

import pytest
from PIL import Image

from content.images import ImageInfo, ImageLimits, ImageUnreadable, inspect, prepare
from tests.image_kit import encoded, opened, photo, picture, sideways_jpeg

WIDE = ImageLimits(long_edge=1568, max_pixels=1_200_000)


def test_an_image_that_fits_goes_as_it_is() -> None:
    data = photo(300, 200)
    made = prepare(data, WIDE)
    assert made.data is data and not made.converted
    assert (made.mime_type, made.width, made.height) == ("image/jpeg", 300, 200)


def test_the_header_tells_the_upright_size_and_the_real_type() -> None:
    assert inspect(sideways_jpeg(80, 40)) == ImageInfo("image/jpeg", 40, 80)
    assert inspect(photo(30, 20, "PNG")).mime_type == "image/png"


def test_a_photo_saved_as_png_over_the_cap_becomes_a_jpeg_under_it() -> None:
    data = photo(1000, 800, "PNG")
    limits = ImageLimits(long_edge=1568, max_bytes=len(data) // 2)
    made = prepare(data, limits)
    assert made.mime_type == "image/jpeg" and len(made.data) <= limits.max_bytes
    assert (made.width, made.height) == (1000, 800)  # JPEG alone was enough: not shrunk


def test_a_transparent_image_over_the_cap_shrinks_and_keeps_its_alpha() -> None:
    image = picture(600, 400, "RGBA")
    image.putalpha(100)
    data = encoded(image, "PNG")
    limits = ImageLimits(long_edge=1568, max_bytes=len(data) // 3)
    made = prepare(data, limits)
    assert made.mime_type == "image/png" and len(made.data) <= limits.max_bytes
    assert made.width < 600 and opened(made.data).mode == "RGBA"


def test_a_palette_gif_with_transparency_goes_as_a_png_where_gifs_are_not_taken() -> None:
    image = Image.new("P", (40, 30), 0)
    image.info["transparency"] = 0
    limits = ImageLimits(long_edge=1568, types=frozenset({"image/png", "image/jpeg"}))
    made = prepare(encoded(image, "GIF", transparency=0), limits)
    assert made.mime_type == "image/png" and opened(made.data).mode == "RGBA"


@pytest.mark.parametrize(
    "data",
    [b"", b"GIF89a", photo(200, 100)[:200], b"<svg xmlns='http://www.w3.org/2000/svg'/>"],
    ids=["empty", "header only", "truncated", "svg"],
)
def test_what_is_no_image_raises_unreadable(data: bytes) -> None:
    with pytest.raises(ImageUnreadable):
        prepare(data, WIDE)


def test_a_cameras_multi_picture_jpeg_goes_as_its_first_picture() -> None:
    data = encoded(picture(3000, 2000), "MPO", save_all=True, append_images=[picture(30, 20)])
    made = prepare(data, WIDE)
    assert made.mime_type == "image/jpeg" and opened(made.data).format == "JPEG"
    assert made.width <= 1568 and made.width * made.height <= 1_200_000


def test_a_jpeg_the_dct_scales_to_just_under_the_bound_is_sent_at_that_size() -> None:
    # 4000×3000 at 1/4 in the DCT is 1000×750: 2.3 % under a 1024×768 bound, so it is decoded
    # at that scale and sent as it comes (not decoded at 1/2 and scaled down again)
    near = prepare(photo(4000, 3000), ImageLimits(long_edge=1024, max_pixels=1024 * 768))
    assert (near.width, near.height) == (1000, 750)
    # 1/4 of 3600×2700 is 900×675, 12 % under: decoded at 1/2 and scaled to the bound itself
    far = prepare(photo(3600, 2700), ImageLimits(long_edge=1024, max_pixels=1024 * 768))
    assert (far.width, far.height) == (1024, 768)
