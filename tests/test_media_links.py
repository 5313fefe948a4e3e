"""Signed blob links on the app's web server: the bytes with safe headers for a link we signed,
403 for an unsigned, altered or expired one; the secret shared through the media folder."""

from __future__ import annotations

import stat
from pathlib import Path

from aiohttp import ClientSession

from bot.media.build import build_links
from bot.media.links import SECRET_FILE, HmacBlobLinks, link_secret
from bot.runtime.app import App
from content.blobs import blob_id_of
from tests.conftest import Running

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
SVG = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _links(app: App) -> HmacBlobLinks:
    assert app.links is not None
    return app.links


async def test_a_signed_link_serves_the_bytes_with_safe_headers(
    running: Running, session: ClientSession
) -> None:
    app = await running()
    image = await app.blobs.put(PNG, mime_type="image/png", name="chart.png")
    async with session.get(app.url + _links(app).link(image.blob_id, "chart.png")) as response:
        assert response.status == 200 and await response.read() == PNG
        assert response.headers["Content-Type"] == "image/png"
        assert response.headers["Content-Disposition"] == "inline; filename*=UTF-8''chart.png"
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Content-Security-Policy"] == "default-src 'none'; sandbox"
    pdf = await app.blobs.put(b"%PDF-1.7", mime_type="application/pdf", name="Rechnung März.pdf")
    async with session.get(app.url + _links(app).link(pdf.blob_id, pdf.name)) as response:
        assert response.status == 200 and response.headers["Content-Type"] == "application/pdf"
        disposition = response.headers["Content-Disposition"]
        assert disposition == "attachment; filename*=UTF-8''Rechnung%20M%C3%A4rz.pdf"
    svg = await app.blobs.put(SVG, mime_type="image/svg+xml")  # script inside: a file, never shown
    async with session.get(app.url + _links(app).link(svg.blob_id)) as response:
        assert response.status == 200 and response.headers["Content-Disposition"] == "attachment"
        assert response.headers["Content-Security-Policy"] == "default-src 'none'; sandbox"


async def test_unsigned_altered_and_expired_links_are_refused(
    running: Running, session: ClientSession, tmp_path: Path
) -> None:
    app = await running()
    secret = await app.blobs.put(b"payslip", mime_type="application/pdf", name="payslip.pdf")
    other = await app.blobs.put(b"someone else's", mime_type="application/pdf")
    good = _links(app).link(secret.blob_id, "payslip.pdf")
    sig = good.split("sig=")[1].split("&")[0]
    refused = [
        f"/media/{secret.blob_id}",  # unsigned
        good.replace(secret.blob_id, other.blob_id),  # another blob under this signature
        good.replace("payslip.pdf", "payslip.html"),  # another name
        good.replace(f"sig={sig}", f"sig={sig[:-2]}AA"),  # a forged signature
        good.replace("exp=", "exp=9"),  # a later expiry
        f"/media/{secret.blob_id}?exp=&sig={sig}&name=payslip.pdf",
        good.replace(f"sig={sig}", "sig=%C3%A9t%C3%A9"),  # not even ASCII
    ]
    foreign = HmacBlobLinks(b"another gateway's secret", ttl_s=60).link(secret.blob_id)
    for path in [*refused, foreign]:
        async with session.get(app.url + path) as response:
            assert response.status == 403, path
            assert b"payslip" not in await response.read()
    # another process on the same folder: its links are good here, but not once expired
    now = build_links(app.config.media, app.media_dir).link(secret.blob_id)
    past = build_links(app.config.media, app.media_dir, clock=Clock(1_000_000.0))
    expired = past.link(secret.blob_id)
    async with session.get(app.url + expired) as response:
        assert response.status == 403  # signed with the right secret, but long past its expiry
    for path in (good, now):
        async with session.get(app.url + path) as response:
            assert response.status == 200 and await response.read() == b"payslip"


async def test_a_link_expires_by_the_clock() -> None:
    clock = Clock(1_000_000.0)
    links = HmacBlobLinks(b"k" * 32, ttl_s=60, clock=clock)
    path = links.link(blob_id_of(b"x"), "x.txt")
    query = dict(item.split("=", 1) for item in path.split("?", 1)[1].split("&"))
    assert links.admits(blob_id_of(b"x"), query["exp"], query["sig"], "x.txt")
    clock.now += 60
    assert links.admits(blob_id_of(b"x"), query["exp"], query["sig"], "x.txt")
    clock.now += 1
    assert not links.admits(blob_id_of(b"x"), query["exp"], query["sig"], "x.txt")


async def test_a_blob_gone_by_retention_is_not_found(
    running: Running, session: ClientSession
) -> None:
    app = await running()
    async with session.get(app.url + _links(app).link(blob_id_of(b"purged"))) as response:
        assert response.status == 404


def test_the_secret_is_made_once_private_and_shared_through_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "media"
    first = link_secret("", folder)
    assert len(first) == 64 and link_secret("", folder) == first  # a second process agrees
    assert stat.S_IMODE((folder / SECRET_FILE).stat().st_mode) == 0o600
    assert [p.name for p in folder.iterdir()] == [SECRET_FILE]  # no temporary file left
    assert link_secret("configured-secret-value", tmp_path / "other") == b"configured-secret-value"
    assert not (tmp_path / "other").exists()
