"""Several processes opening one NEW SQLite file at the same instant (two `bot serve` started
together on a fresh deployment): every one of them opens it, none meets "database is locked"
while it is switched to WAL or while the schema is created, and the schema is applied once.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from tests.processes import ROOT

pytestmark = [pytest.mark.process, pytest.mark.timeout(300)]
PROCESSES = 4
ROUNDS = 5

# Each process imports first, then waits for the same instant, then opens the store.
OPEN = """
import asyncio, sys, time
from bot.storage.store import SqliteStore

async def main() -> None:
    start = float(sys.argv[2])
    while time.time() < start:
        pass
    store = SqliteStore(sys.argv[1])
    await store.open()
    await store.close()

asyncio.run(main())
"""


async def _open_together(path: Path) -> list[tuple[int, str]]:
    start = time.time() + 3.0  # after every interpreter has imported the store (a loaded machine)
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            OPEN,
            str(path),
            repr(start),
            cwd=ROOT,
            stderr=asyncio.subprocess.PIPE,
        )
        for _ in range(PROCESSES)
    ]
    results = []
    for process in processes:
        _, err = await process.communicate()
        results.append((process.returncode or 0, err.decode(errors="replace")))
    return results


async def test_processes_creating_one_new_database_together_all_open_it(tmp_path: Path) -> None:
    for round_no in range(ROUNDS):
        path = tmp_path / f"round{round_no}" / "bot.db"
        results = await _open_together(path)
        failed = [err for code, err in results if code != 0]
        assert not failed, f"round {round_no}: {len(failed)} failed:\n" + failed[0]
        with sqlite3.connect(path) as db:
            versions = [v for (v,) in db.execute("SELECT version FROM schema_migrations")]
            mode = db.execute("PRAGMA journal_mode").fetchone()[0]
        assert versions == sorted(set(versions)) and len(versions) >= 8  # each applied once
        assert mode == "wal"
