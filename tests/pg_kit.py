"""A PostgreSQL database of this test session's own, on the local server; a TCP link we can cut.

Tests never stop the shared server: `CuttableLink` is a TCP proxy in front of it whose
connections the test breaks (and whose port it closes) to make the database unreachable, or
which stops passing bytes on (a silent, half-open link).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import asyncpg
import pytest

from tests.tcp_proxy import TcpProxy

SERVER = os.environ.get("TEST_PG_SERVER", "postgresql://postgres@127.0.0.1:5432")
HOST, PORT = "127.0.0.1", 5432


async def _admin(sql: str) -> None:
    conn = await asyncpg.connect(f"{SERVER}/postgres", timeout=3)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """The url of an empty database `gw_test_<pid>`, dropped when the session ends."""
    name = f"gw_test_{os.getpid()}"
    try:
        asyncio.run(_admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        asyncio.run(_admin(f"CREATE DATABASE {name}"))
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        pytest.skip(f"no PostgreSQL server answers at {SERVER} ({exc}); `.ci/run` starts one")
    yield f"{SERVER}/{name}"
    asyncio.run(_admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


async def empty_schema(url: str) -> None:
    """Drops every table (the migrations' versions too): the next store starts from nothing."""
    conn = await asyncpg.connect(url, timeout=3)
    try:
        await conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    finally:
        await conn.close()


@pytest.fixture
async def pg_url(pg_database: str) -> str:
    """The session's database, emptied for this test."""
    await empty_schema(pg_database)
    return pg_database


class CuttableLink(TcpProxy):
    """A TCP proxy to the PostgreSQL server; `cut()` breaks every connection and refuses new
    ones, `restore()` accepts again on the same port; while `flowing` is clear, nothing passes."""

    def __init__(self) -> None:
        super().__init__((HOST, PORT), HOST)

    def url(self, database_url: str) -> str:
        return database_url.replace(f"{HOST}:{PORT}", f"{HOST}:{self.port}")

    async def restore(self) -> None:
        await self.listen()
