"""The `QuotaState` contract, for every implementation: counts add up per bucket, and expire."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from bot.quota import MemoryQuotaState, QuotaState, StoreQuotaState
from bot.storage import SqliteStore
from bot.storage.backends import build_store
from tests.pg_kit import pg_database, pg_url

__all__ = ["pg_database", "pg_url"]  # fixtures the contract uses

IMPLEMENTATIONS = ["memory", "sqlite", "postgresql"]  # a Redis one joins here
MakeState = Callable[[], QuotaState]


@pytest.fixture(params=IMPLEMENTATIONS)
def backend(request: pytest.FixtureRequest) -> tuple[str, str | None]:
    """The implementation, with its database URL (a sync fixture: pg_url runs its own loop)."""
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    return request.param, url


@pytest.fixture
async def make(backend: tuple[str, str | None], tmp_path: Path) -> AsyncIterator[MakeState]:
    """`make()`: a QuotaState of the implementation under test; all share one backing store."""
    kind, url = backend
    if kind == "memory":
        shared = MemoryQuotaState()
        yield lambda: shared
        return
    async with build_store(tmp_path / "bot.db", url) as store:
        yield lambda: StoreQuotaState(store)


async def test_additions_add_up_per_bucket(make: MakeState) -> None:
    state = make()
    later = time.time() + 60
    assert await state.counts(["user:a:minute:0"]) == {}
    await state.add("user:a:minute:0", turns=1, tokens=0, expires_at=later)
    await state.add("user:a:minute:0", turns=0, tokens=120, expires_at=later)
    await state.add("user:a:minute:0", turns=1, tokens=30, expires_at=later)
    await state.add("user:b:minute:0", turns=1, tokens=5, expires_at=later)
    counts = await state.counts(["user:a:minute:0", "user:b:minute:0", "user:c:minute:0"])
    assert counts == {"user:a:minute:0": (2, 150), "user:b:minute:0": (1, 5)}


async def test_an_expired_bucket_counts_nothing(make: MakeState) -> None:
    state = make()
    await state.add("user:a:minute:0", turns=3, tokens=9, expires_at=time.time() - 1)
    await state.add("user:a:day:0", turns=3, tokens=9, expires_at=time.time() + 60)
    counts = await state.counts(["user:a:minute:0", "user:a:day:0"])
    assert "user:a:minute:0" not in counts
    assert counts["user:a:day:0"] == (3, 9)


async def test_counts_are_shared_by_everything_on_the_same_backing(make: MakeState) -> None:
    one, two = make(), make()
    await one.add("conversation:web:x:day:0", turns=1, tokens=10, expires_at=time.time() + 60)
    await two.add("conversation:web:x:day:0", turns=1, tokens=10, expires_at=time.time() + 60)
    assert await one.counts(["conversation:web:x:day:0"]) == {"conversation:web:x:day:0": (2, 20)}


async def test_store_counts_survive_a_restart(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "bot.db") as store:
        await StoreQuotaState(store).add(
            "user:a:day:0", turns=4, tokens=1, expires_at=time.time() + 60
        )
    async with SqliteStore(tmp_path / "bot.db") as store:
        assert await StoreQuotaState(store).counts(["user:a:day:0"]) == {"user:a:day:0": (4, 1)}
