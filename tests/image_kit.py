"""Test images made with Pillow: photos (a gradient with noise, so encoders work as on a real
one), with an EXIF orientation, transparent, animated, in any format Pillow writes."""

from __future__ import annotations

import base64
import io
from typing import Any

from PIL import Image


def picture(width: int, height: int, mode: str = "RGB") -> Image.Image:
    """A photo-like image: left dark, right light, noise over it (a flat one compresses to
    nothing and hides what a size cap does)."""
    gradient = Image.linear_gradient("L").rotate(90).resize((width, height))
    noise = Image.effect_noise((max(1, width // 4), max(1, height // 4)), 40).resize(
        (width, height)
    )
    image = Image.merge("RGB", (gradient, noise, gradient))
    return image.convert(mode) if mode != "RGB" else image


def encoded(image: Image.Image, fmt: str, **options: Any) -> bytes:
    if fmt == "HEIF":
        import pillow_heif

        pillow_heif.register_heif_opener()
    out = io.BytesIO()
    image.save(out, fmt, **options)
    return out.getvalue()


def photo(width: int, height: int, fmt: str = "JPEG", **options: Any) -> bytes:
    return encoded(picture(width, height), fmt, **options)


def sideways_jpeg(width: int, height: int) -> bytes:
    """Stored `width` x `height`, with EXIF orientation 6: shown rotated, `height` wide."""
    exif = Image.Exif()
    exif[0x0112] = 6
    return encoded(picture(width, height), "JPEG", exif=exif.tobytes())


def animated_gif(width: int, height: int, frames: int = 3) -> bytes:
    shots = [Image.new("RGB", (width, height), (80 * n, 40, 200)) for n in range(frames)]
    out = io.BytesIO()
    shots[0].save(out, "GIF", save_all=True, append_images=shots[1:], duration=100, loop=0)
    return out.getvalue()


def opened(data: bytes | str) -> Image.Image:
    """The image in `data` (bytes, base64 or a data: URL), as a vendor would decode it."""
    if isinstance(data, str):
        data = base64.b64decode(data.rpartition(",")[2])
    image = Image.open(io.BytesIO(data))
    image.load()
    return image
