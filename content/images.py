"""An image made fit for a model: scaled to what the vendor takes best, in a type it takes.

A phone photo is 12 MP or more, often HEIC, often stored sideways with an EXIF orientation; a
vendor wants a few megapixels at most, in JPEG, PNG, GIF or WebP, and refuses what is larger
than its cap (Anthropic: 5 MB of base64, so 3.75 MB of bytes). `prepare` returns the bytes to
send: the original when it already fits (nothing decoded), else the image decoded at the
smallest size that still covers the target (a JPEG's decoder scales by 1/2, 1/4 or 1/8 in the
DCT: `Image.draft`, so a 12 MP photo is never decoded whole), turned upright, scaled by area
average and encoded as JPEG (PNG where there is transparency). Its EXIF (location,
camera) is not copied into what is sent. What cannot be decoded raises `ImageUnreadable`: the
caller describes it in words, never sends it. SVG is no image here: it is never decoded.

Pure functions on bytes, CPU-bound: callers run them in a thread (Pillow releases the GIL
while it decodes, scales and encodes).
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

from PIL import Image, UnidentifiedImageError

try:  # HEIC/HEIF photos (iPhones): an opener Pillow then uses like its own
    from pillow_heif import register_heif_opener

    register_heif_opener()
except ImportError:  # pragma: no cover - a dependency; without it a HEIC is "unreadable"
    pass

# Pillow's format names -> media types a vendor may take as they are
_MEDIA_TYPES = {"JPEG": "image/jpeg", "PNG": "image/png", "GIF": "image/gif", "WEBP": "image/webp"}
# EXIF orientation -> how to turn the stored pixels upright (as ImageOps.exif_transpose does)
_UPRIGHT = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}
_ORIENTATION = 0x0112
MAX_PIXELS = 120_000_000  # a 108 MP phone photo passes; a decompression bomb does not
JPEG_QUALITY = 85
DRAFT_SLACK = 0.97  # a JPEG decoded by the DCT up to 3 % under the bound is sent at that size


class ImageUnreadable(ValueError):
    """The bytes are no image this library decodes (broken, truncated, not an image at all)."""


@dataclass(frozen=True, slots=True)
class ImageLimits:
    """What one vendor takes best: a long edge, a short edge and a pixel count not to exceed
    (0: no such bound), its cap on the bytes of one image, the types it takes as they are."""

    long_edge: int
    short_edge: int = 0
    max_pixels: int = 0
    max_bytes: int = 3_750_000
    types: frozenset[str] = frozenset(_MEDIA_TYPES.values())
    animated_gif: bool = True  # False: the first frame, as a PNG

    @property
    def key(self) -> str:
        """Names the target: a prepared image is kept per blob and target."""
        return f"{self.long_edge}x{self.short_edge}x{self.max_pixels}x{self.max_bytes}"

    def scale(self, width: int, height: int) -> float:
        """The factor (at most 1) that brings an upright width x height within these bounds."""
        factors = [1.0, self.long_edge / max(width, height)]
        if self.short_edge:
            factors.append(self.short_edge / min(width, height))
        if self.max_pixels:
            factors.append(math.sqrt(self.max_pixels / (width * height)))
        return min(factors)


@dataclass(frozen=True, slots=True)
class Prepared:
    """The image to send (`data` of `mime_type`, `width` x `height`) and the original's size."""

    data: bytes
    mime_type: str
    width: int
    height: int
    original: tuple[int, int]
    converted: bool  # False: the original bytes, as they were


@dataclass(frozen=True, slots=True)
class ImageInfo:
    """What the header says: the real type (not the name's) and the upright size."""

    mime_type: str
    width: int
    height: int


def inspect(data: bytes) -> ImageInfo:
    """The image's type and upright size from its header alone (nothing decoded)."""
    with _open(data) as image:
        width, height = _upright_size(image)
        return ImageInfo(_mime(image), width, height)


def prepare(data: bytes, limits: ImageLimits) -> Prepared:
    """`data` as the vendor takes it best (module docstring); `ImageUnreadable` if it is none."""
    with _open(data) as image:
        original = _upright_size(image)
        orientation = _orientation(image)
        factor = limits.scale(*original)
        animated = getattr(image, "is_animated", False) and not limits.animated_gif
        mime = _mime(image)
        if (
            factor >= 1
            and orientation in (1, None)
            and mime in limits.types
            and not animated
            and len(data) <= limits.max_bytes
        ):
            return Prepared(data, mime, *original, original, converted=False)
        try:
            return _convert(image, original, factor, orientation, limits)
        except (OSError, ValueError, EOFError, SyntaxError) as exc:  # a truncated or broken body
            raise ImageUnreadable(f"the image cannot be decoded ({exc})") from None


def _open(data: bytes) -> Image.Image:
    try:
        image = Image.open(io.BytesIO(data))
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise ImageUnreadable(f"not an image this bot reads ({exc})") from None
    except Image.DecompressionBombError as exc:
        raise ImageUnreadable(str(exc)) from None
    if image.width * image.height > MAX_PIXELS or not image.width or not image.height:
        image.close()
        raise ImageUnreadable(f"too many pixels ({image.width}x{image.height})")
    return image


def _mime(image: Image.Image) -> str:
    return _MEDIA_TYPES.get(image.format or "", f"image/{(image.format or 'unknown').lower()}")


def _orientation(image: Image.Image) -> int | None:
    try:
        if image.format == "PNG":  # getexif() decodes a PNG whole to look past its pixels
            raw = image.info.get("exif")
            exif = Image.Exif()
            if isinstance(raw, bytes):
                exif.load(raw)
        else:
            exif = image.getexif()
        value = exif.get(_ORIENTATION)
    except Exception:  # a broken EXIF block: the pixels are still worth sending
        return None
    return value if isinstance(value, int) else None


def _upright_size(image: Image.Image) -> tuple[int, int]:
    turned = _orientation(image) in (5, 6, 7, 8)
    return (image.height, image.width) if turned else (image.width, image.height)


def _convert(
    image: Image.Image,
    original: tuple[int, int],
    factor: float,
    orientation: int | None,
    limits: ImageLimits,
) -> Prepared:
    turned = orientation in (5, 6, 7, 8)
    width, height = (original[1], original[0]) if turned else original  # as stored
    target = (max(1, int(width * factor)), max(1, int(height * factor)))  # never over a bound
    if image.format in ("JPEG", "MPO"):  # MPO: a camera's JPEG with more pictures after it
        # the decoder scales by 1/2..1/8 in the DCT: never more than the target needs, or a
        # few per cent less (a 12 MP photo decoded at 1/4, 1008×756 for a 1024×768 bound,
        # costs ~30 % less CPU than at 1/2 and looks the same to a model)
        near = (math.ceil(target[0] * DRAFT_SLACK), math.ceil(target[1] * DRAFT_SLACK))
        image.draft("RGB" if image.mode not in ("L", "CMYK") else image.mode, near)
        (w, h), (nw, nh) = image.size, near
        if nw <= w <= target[0] and nh <= h <= target[1]:  # the DCT's size is close enough
            target = (w, h)
    frame = image.convert("RGBA") if image.mode in ("P", "PA") else image
    if frame.size != target:
        # an area average (Pillow's box filter widens with the scale: every source pixel counts,
        # nothing aliases): after the DCT's halving the rest is a factor under 2, where it is as
        # good as bilinear or bicubic for a model's eyes at 70 % / 50 % of their CPU
        frame = frame.resize(target, Image.Resampling.BOX, reducing_gap=3.0)
    if orientation in _UPRIGHT:
        frame = frame.transpose(_UPRIGHT[orientation])
    alpha = frame.mode in ("RGBA", "LA") and frame.getextrema()[-1][0] < 255  # type: ignore[index]
    keep_png = image.format in ("PNG", "GIF") or alpha
    for _ in range(4):
        data, mime = _encode(frame, alpha, png=keep_png)
        if len(data) <= limits.max_bytes:
            return Prepared(data, mime, frame.width, frame.height, original, converted=True)
        if keep_png and not alpha:
            keep_png = False  # a photo saved as PNG: JPEG holds it in far fewer bytes
            continue
        shrink = math.sqrt(limits.max_bytes / len(data)) * 0.9
        size = (max(1, int(frame.width * shrink)), max(1, int(frame.height * shrink)))
        frame = frame.resize(size, Image.Resampling.BOX)
    raise ImageUnreadable(f"the image stays over {limits.max_bytes} bytes however it is encoded")


def _encode(frame: Image.Image, alpha: bool, *, png: bool) -> tuple[bytes, str]:
    out = io.BytesIO()
    if png:
        mode = ("RGBA" if frame.mode != "LA" else "LA") if alpha else _opaque(frame.mode)
        frame.convert(mode).save(out, "PNG", compress_level=1)  # 3: -10 % bytes, +35 % CPU
        return out.getvalue(), "image/png"
    frame.convert(_opaque(frame.mode)).save(out, "JPEG", quality=JPEG_QUALITY)
    return out.getvalue(), "image/jpeg"


def _opaque(mode: str) -> str:
    return "L" if mode in ("L", "LA", "1") else "RGB"
