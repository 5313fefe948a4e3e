"""The `BlobStore` contract, for every implementation: round trip, one blob per content, the size
cap, unknown ids, and retention by age (the store's clock driven, no sleeps)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from bot.media.records import RecordBlobStore
from bot.storage import SqliteStore
from bot.storage.pg import PostgresStore
from content.blobs import BlobNotFound, BlobStore, BlobTooLarge, blob_id_of
from content.disk import DiskBlobStore
from tests.pg_kit import pg_database, pg_url

__all__ = ["pg_database", "pg_url"]

DAY = 86400.0
CAP = 1000


class Clock:
    """The stores' clock: wall time at first, moved on by the test."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


MakeStore = Callable[[Clock], BlobStore]


@pytest.fixture(params=["disk", "sqlite", "postgresql"])
def backing(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the implementation keeps blobs: a folder, or a database (its path or url)."""
    if request.param == "postgresql":
        url: str = request.getfixturevalue("pg_url")  # skips when no server answers
        return url
    return str(tmp_path / ("media" if request.param == "disk" else "bot.db"))


@pytest.fixture
async def make(backing: str) -> AsyncIterator[MakeStore]:
    """`make(clock)`: the implementation under test, capped at CAP bytes (one backing store)."""
    if backing.endswith("media"):
        yield lambda clock: DiskBlobStore(Path(backing), max_bytes=CAP, clock=clock)
        return
    store = PostgresStore(backing) if "://" in backing else SqliteStore(backing)
    async with store:
        yield lambda clock: RecordBlobStore(store, max_bytes=CAP, clock=clock)


async def test_a_blob_comes_back_as_it_went_in(make: MakeStore) -> None:
    store = make(Clock())
    data = bytes(range(256)) * 3  # every byte value, newlines included
    ref = await store.put(data, mime_type="image/png", name="chart.png", source="tool:chart")
    assert (ref.blob_id, ref.mime_type, ref.size) == (blob_id_of(data), "image/png", len(data))
    assert (ref.name, ref.source) == ("chart.png", "tool:chart")
    assert await store.get(ref.blob_id) == ("image/png", data)
    empty = await store.put(b"", mime_type="text/plain")
    assert await store.get(empty.blob_id) == ("text/plain", b"")
    assert store.max_bytes == CAP


async def test_the_same_bytes_are_one_blob(make: MakeStore) -> None:
    store = make(Clock())
    first = await store.put(b"%PDF-1.7 same", mime_type="application/pdf", name="a.pdf")
    second = await store.put(b"%PDF-1.7 same", mime_type="application/pdf", name="b.pdf")
    other = await store.put(b"%PDF-1.7 other", mime_type="application/pdf")
    assert first.blob_id == second.blob_id != other.blob_id
    assert second.name == "b.pdf"  # the reference is the caller's; the bytes are shared
    assert await store.get(first.blob_id) == ("application/pdf", b"%PDF-1.7 same")


async def test_over_the_cap_is_refused_and_nothing_is_kept(make: MakeStore) -> None:
    store = make(Clock())
    data = b"x" * (CAP + 1)
    with pytest.raises(BlobTooLarge) as refused:
        await store.put(data, mime_type="video/mp4")
    assert (refused.value.size, refused.value.limit) == (CAP + 1, CAP)
    assert "media.max_bytes" in str(refused.value)
    with pytest.raises(BlobNotFound):
        await store.get(blob_id_of(data))
    exact = await store.put(b"y" * CAP, mime_type="video/mp4")  # the cap itself is allowed
    assert (await store.get(exact.blob_id))[1] == b"y" * CAP


@pytest.mark.parametrize("blob_id", [blob_id_of(b"never"), "", "../../etc/passwd", "ab/cd"])
async def test_an_unknown_id_is_not_found(make: MakeStore, blob_id: str) -> None:
    store = make(Clock())
    await store.put(b"something", mime_type="text/plain")
    with pytest.raises(BlobNotFound) as missing:
        await store.get(blob_id)
    assert missing.value.blob_id == blob_id


async def test_retention_removes_what_is_older_than_the_age(make: MakeStore) -> None:
    clock = Clock()
    store = make(clock)
    old = await store.put(b"old photo", mime_type="image/jpeg")
    clock.now += 2 * DAY
    new = await store.put(b"new photo", mime_type="image/jpeg")
    assert await store.purge(30 * DAY) == 0  # nothing is that old
    clock.now += DAY  # old: 3 days, new: 1 day
    assert await store.purge(2 * DAY) == 1
    with pytest.raises(BlobNotFound):
        await store.get(old.blob_id)
    assert await store.get(new.blob_id) == ("image/jpeg", b"new photo")
    again = await store.put(b"old photo", mime_type="image/jpeg")  # stored anew after its purge
    assert await store.get(again.blob_id) == ("image/jpeg", b"old photo")
    assert await store.purge(2 * DAY) == 0
