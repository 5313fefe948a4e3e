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


def text_pdf(*pages: str) -> bytes:
    """A PDF with one line of text on each page (Helvetica), its cross-reference table exact."""
    count = len(pages)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids ["
        + b" ".join(f"{4 + 2 * n} 0 R".encode() for n in range(count))
        + f"] /Count {count} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for n, text in enumerate(pages):
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {5 + 2 * n} 0 R"
            " /Resources << /Font << /F1 3 0 R >> >> >>".encode()
        )
        objects.append(f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return bytes(out)
