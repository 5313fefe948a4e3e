"""Benchmark: an inbound image on its way to the model, and the memory of many uploads at once.

1. CPU per image of what a provider does before it sends a user's photo (content/images.py,
   agent/providers/media_load.py): decode (a JPEG by DCT scaling, `Image.draft`), turn
   upright, scale to the vendor's bounds, encode, then base64 — for photo-like JPEG and PNG
   at 1, 4 and 12 MP and a HEIC at 12 MP, against Anthropic's bounds (1,568 px, ~1.2 MP) and
   OpenAI's (2,000 x 768 px). Printed: the median CPU time (this process, every thread: the
   decoders may use several) over ROUNDS runs, split into prepare and base64, and what is
   sent. Goal: <= 50 ms for a 12 MP JPEG photo.
2. Memory: UPLOADS clients upload a file of SIZE MB each, all at once, through the widget's
   upload route (`POST /ws/files`, adapters/uploads.py) of a real aiohttp server into the disk
   blob store. The server runs in a child process; printed: its peak RSS over its RSS before
   (VmHWM, so nothing between two samples is missed), Python's own peak allocation
   (tracemalloc) and both in copies of the file held at once per upload. Goal: <= 2.

    python bench/media_bench.py [--rounds 5] [--uploads 20] [--size-mb 15] [--skip-heic]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import multiprocessing
import statistics
import sys
import tempfile
import time
import tracemalloc
from multiprocessing.connection import Connection
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402
from aiohttp import web  # noqa: E402

from adapters.uploads import UploadSigner  # noqa: E402
from adapters.websocket import WebSocketChannel  # noqa: E402
from agent.providers.media import ANTHROPIC_IMAGES, OPENAI_IMAGES  # noqa: E402
from content.disk import DiskBlobStore  # noqa: E402
from content.images import ImageLimits, prepare  # noqa: E402
from tests.blob_kit import PlainLinks  # noqa: E402
from tests.image_kit import encoded, picture  # noqa: E402

SIZES = {1: (1152, 864), 4: (2309, 1732), 12: (4000, 3000)}  # 4:3, as phones take them
ORIGIN = "http://127.0.0.1:8080"
SECRET = b"b" * 32


def images(skip_heic: bool) -> list[tuple[str, bytes]]:
    made = []
    for mp, (width, height) in SIZES.items():
        shot = picture(width, height)
        made.append((f"JPEG {mp:>2} MP", encoded(shot, "JPEG", quality=90)))
        made.append((f"PNG  {mp:>2} MP", encoded(shot, "PNG")))
    if not skip_heic:  # x265's fastest preset: the slow one takes over a minute to make it
        shot = picture(*SIZES[12])
        made.append(("HEIC 12 MP", encoded(shot, "HEIF", quality=60, enc_params={"preset": "ultrafast"})))  # fmt: skip
    return made


def cpu_ms(data: bytes, limits: ImageLimits, rounds: int) -> tuple[float, float, str]:
    """Median CPU ms of prepare and of base64 over `rounds`, and what was sent."""
    prepared, encoded_ms = [], []
    for _ in range(rounds):
        start = time.process_time()
        image = prepare(data, limits)
        middle = time.process_time()
        base64.b64encode(image.data)
        prepared.append((middle - start) * 1000)
        encoded_ms.append((time.process_time() - middle) * 1000)
    sent = (
        f"{image.width}x{image.height} {image.mime_type.split('/')[1]} {len(image.data) // 1024} KB"
    )
    return statistics.median(prepared), statistics.median(encoded_ms), sent


def cpu_table(rounds: int, skip_heic: bool) -> None:
    print(f"CPU per image, median of {rounds} (ms: prepare + base64 = total)")
    print(f"{'input':<12} {'size':>8}  {'anthropic':>22}  {'sent':<22} {'openai':>22}  sent")
    for label, data in images(skip_heic):
        row = [f"{label:<12} {len(data) // 1024:>5} KB"]
        for limits in (ANTHROPIC_IMAGES, OPENAI_IMAGES):
            prep, b64, sent = cpu_ms(data, limits, rounds)
            row.append(f"{prep:7.1f} + {b64:4.1f} = {prep + b64:6.1f}  {sent:<22}")
        print("  ".join(row))


def _rss(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise LookupError(field)


def _reset_peak() -> None:
    """VmHWM back to the current RSS (Linux >= 4.0: write 5 to clear_refs)."""
    Path("/proc/self/clear_refs").write_text("5")


def server(folder: str, pipe: Connection) -> None:
    """The child: the widget channel's routes on a real aiohttp server, a disk blob store."""

    async def main() -> None:
        blobs = DiskBlobStore(Path(folder), max_bytes=50_000_000)
        channel = WebSocketChannel(
            allowed_origins=[ORIGIN],
            blobs=blobs,
            links=PlainLinks(),
            uploads=UploadSigner(SECRET),
        )
        app = web.Application()
        channel.install(app)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        pipe.send(runner.addresses[0][1])
        while (command := await asyncio.to_thread(pipe.recv)) != "stop":
            if command == "start":
                tracemalloc.start()
                _reset_peak()
                pipe.send(_rss("VmRSS"))
            else:
                peak_python = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
                pipe.send((_rss("VmHWM"), peak_python))
        await runner.cleanup()

    asyncio.run(main())


async def upload_all(port: int, count: int, size: int) -> list[int]:
    url = f"http://127.0.0.1:{port}/ws/files"

    async def one(http: aiohttp.ClientSession, n: int) -> int:
        # a visitor each: one conversation's uploads count against its message rate (429)
        token = UploadSigner(SECRET).token(f"bench-visitor-{n}-{count}")
        headers = {"Origin": ORIGIN, "Authorization": f"Bearer {token}"}
        body = bytes([n]) * size  # each a different blob (content-addressed: same bytes, one)
        form = aiohttp.FormData()
        form.add_field("file", body, filename=f"big{n}.bin", content_type="application/pdf")
        async with http.post(url, data=form, headers=headers) as response:
            await response.read()
            return response.status

    async with aiohttp.ClientSession() as http:
        return await asyncio.gather(*(one(http, n) for n in range(count)))


def memory(count: int, size_mb: float) -> None:
    size = int(size_mb * 1_000_000)
    with tempfile.TemporaryDirectory() as folder:
        parent, child = multiprocessing.Pipe()
        process = multiprocessing.get_context("spawn").Process(target=server, args=(folder, child))
        process.start()
        port = parent.recv()
        asyncio.run(upload_all(port, 1, 1_000_000))  # warm: imports, the first request's paths
        parent.send("start")
        before = parent.recv()
        statuses = asyncio.run(upload_all(port, count, size))
        parent.send("report")
        peak_rss, peak_python = parent.recv()
        parent.send("stop")
        process.join(10)
    grown = peak_rss - before
    print(
        f"\n{count} uploads of {size_mb:g} MB at once through POST /ws/files into the disk store"
        f" (answers: {sorted(set(statuses))})"
    )
    print(f"  server peak RSS growth  {grown / 1e6:7.1f} MB = {grown / size:5.1f} files"
          f" = {grown / size / count:4.2f} copies per upload")  # fmt: skip
    print(f"  Python's peak (tracemalloc) {peak_python / 1e6:7.1f} MB"
          f" = {peak_python / size / count:4.2f} copies per upload")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--uploads", type=int, default=20)
    parser.add_argument("--size-mb", type=float, default=15)
    parser.add_argument("--skip-heic", action="store_true")
    args = parser.parse_args()
    cpu_table(args.rounds, args.skip_heic)
    memory(args.uploads, args.size_mb)


if __name__ == "__main__":
    main()
